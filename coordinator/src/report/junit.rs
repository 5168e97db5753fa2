//! JUnit XML of the qualification verdicts: a test suite per host, a test case per cell
//! and threshold, so CI systems show which drive failed which threshold.

use super::{esc, Exporter, Report};

pub struct Junit;

impl Exporter for Junit {
    fn render(&self, r: &Report) -> String {
        let mut hosts: Vec<&str> = r.verdicts.iter().map(|v| v.host.as_str()).collect();
        hosts.dedup();
        let failures = r.verdicts.iter().filter(|v| !v.pass).count();
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{}\" failures=\"{failures}\">\n",
            esc(&r.name),
            r.verdicts.len()
        );
        for host in hosts {
            let cases: Vec<_> = r.verdicts.iter().filter(|v| v.host == host).collect();
            let failed = cases.iter().filter(|v| !v.pass).count();
            out.push_str(&format!(
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">\n",
                esc(host),
                cases.len()
            ));
            for v in cases {
                let class = if v.device.is_empty() {
                    host.to_string()
                } else {
                    format!("{host}.{}", v.device)
                };
                let name = if v.cell.is_empty() {
                    v.threshold.clone()
                } else {
                    format!("{} [{}]", v.threshold, v.cell)
                };
                out.push_str(&format!(
                    "    <testcase classname=\"{}\" name=\"{}\"",
                    esc(&class),
                    esc(&name)
                ));
                if v.pass {
                    out.push_str("/>\n");
                } else {
                    let what = match v.value {
                        _ if !v.measured.is_empty() => {
                            format!("{class} fails {}: measured {}", v.threshold, v.measured)
                        }
                        Some(x) => format!(
                            "{class} fails {}: measured {}",
                            v.threshold,
                            super::human(x, &v.unit)
                        ),
                        None => format!("{class} fails {}: not measured", v.threshold),
                    };
                    out.push_str(&format!(
                        ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                        esc(&what)
                    ));
                }
            }
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }
}
