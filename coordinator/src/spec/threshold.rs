//! Qualification thresholds (`"latency.p99 < 1ms"`): parsing into a metric, a statistic,
//! a comparison and a value in base units (seconds, bytes). Judging them is the report's.

/// One `qualify:` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As written, for messages and JUnit test names.
    pub text: String,
    /// The metric, e.g. `wall` or `latency` (for `latency.p99`).
    pub metric: String,
    pub stat: Stat,
    pub op: Op,
    /// In the metric's base unit (s, B, op/s, …).
    pub value: f64,
}

/// Which number of a cell is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Median,
    Mean,
    Min,
    Max,
    /// A per-operation percentile (0.99 for p99): from the merged histograms when the
    /// metric has them, else the median of the metric `{metric}.pNN` the workload reports.
    Percentile(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn holds(self, x: f64, limit: f64) -> bool {
        match self {
            Op::Lt => x < limit,
            Op::Le => x <= limit,
            Op::Gt => x > limit,
            Op::Ge => x >= limit,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// Parses `METRIC[.STAT] OP VALUE[UNIT]`.
pub fn parse(text: &str) -> Result<Threshold, String> {
    let (left, op, right) = ["<=", ">=", "<", ">"]
        .iter()
        .find_map(|op| text.split_once(op).map(|(l, r)| (l.trim(), *op, r.trim())))
        .ok_or_else(|| format!("`{text}` has no comparison (<, <=, > or >=)"))?;
    let op = match op {
        "<=" => Op::Le,
        ">=" => Op::Ge,
        "<" => Op::Lt,
        _ => Op::Gt,
    };
    if left.is_empty()
        || !left
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!("`{left}` is not a metric name"));
    }
    let (metric, stat) = split_stat(left)?;
    if let Stat::Percentile(q) = stat {
        if !(0.0..=1.0).contains(&q) {
            return Err(format!("percentile {} is not between 0 and 100", q * 100.0));
        }
    }
    Ok(Threshold {
        text: text.trim().to_string(),
        metric: metric.to_string(),
        stat,
        op,
        value: value(right)?,
    })
}

/// `latency.p99.9` → (latency, 0.999); `wall.median` → (wall, median); `x` → (x, median).
fn split_stat(left: &str) -> Result<(&str, Stat), String> {
    // A percentile may contain a dot itself (p99.9), so look for `.p` followed by a number.
    if let Some(at) = left.rfind(".p") {
        let number = &left[at + 2..];
        if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.') {
            let pct: f64 = number
                .parse()
                .map_err(|_| format!("`p{number}` is not a percentile like p99 or p99.9"))?;
            return Ok((&left[..at], Stat::Percentile(pct / 100.0)));
        }
    }
    Ok(match left.rsplit_once('.') {
        Some((m, "median")) => (m, Stat::Median),
        Some((m, "mean")) => (m, Stat::Mean),
        Some((m, "min")) => (m, Stat::Min),
        Some((m, "max")) => (m, Stat::Max),
        _ => (left, Stat::Median),
    })
}

/// `1ms` → 0.001, `2GiB` → 2147483648, `5%` → 5, `300` → 300.
fn value(text: &str) -> Result<f64, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number with an optional unit"))?;
    let scale = match unit.trim() {
        "" | "%" | "op/s" | "B/s" => 1.0,
        "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "min" => 60.0,
        "B" => 1.0,
        "KiB" | "K" => 1024.0,
        "MiB" | "M" => 1024.0 * 1024.0,
        "GiB" | "G" => 1024.0 * 1024.0 * 1024.0,
        "MB/s" => 1e6,
        other => {
            return Err(format!(
                "unknown unit `{other}` (use s, ms, us, ns, B, KiB, MiB, GiB, % or none)"
            ))
        }
    };
    Ok(n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_into_base_units() {
        let t = parse("latency.p99 < 1ms").unwrap();
        assert_eq!(
            (t.metric.as_str(), t.stat, t.op, t.value),
            ("latency", Stat::Percentile(0.99), Op::Lt, 0.001)
        );
        let t = parse("latency.p99.9 <= 500us").unwrap();
        assert_eq!(t.metric, "latency");
        assert!(matches!(t.stat, Stat::Percentile(q) if (q - 0.999).abs() < 1e-12));
        assert!((t.value - 0.0005).abs() < 1e-15);
        let t = parse("wall.median < 300s").unwrap();
        assert_eq!(
            (t.metric.as_str(), t.stat, t.value),
            ("wall", Stat::Median, 300.0)
        );
        let t = parse("write.iops >= 5000").unwrap();
        assert_eq!(
            (t.metric.as_str(), t.stat, t.op),
            ("write.iops", Stat::Median, Op::Ge)
        );
        assert_eq!(
            parse("put_block.max > 2MiB").unwrap().value,
            2.0 * 1024.0 * 1024.0
        );
        assert!(parse("wall 300s").unwrap_err().contains("no comparison"));
        assert!(parse("wall < 3 fortnights")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse("latency.p999 < 1ms")
            .unwrap_err()
            .contains("not between 0 and 100"));
    }
}
