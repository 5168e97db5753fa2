//! The one reader of `/proc/self/mountinfo` (or a fake file standing in for it): inventory,
//! provenance, storage and the executor all take their mounts from [`parse`]. Pure text in,
//! mounts out; it never decides what a mount means.
//!
//! Not the `procfs` crate (0.18, checked 2026-12-01): its parser (`procfs_core::process::
//! MountInfo::from_line`, usable on any text) leaves the kernel's `\ooo` escapes in mount
//! points and sources (eminence/procfs#262, open), so a mount point with a space would not be
//! found; it keeps options in a `HashMap`, losing the order provenance reports them in; and
//! one line it cannot read fails the whole file, where inventory must keep what it can read.

use std::path::Path;

/// One line of mountinfo:
/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPER`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Mount {
    /// `st_dev` of the filesystem, e.g. "8:1" (btrfs: an anonymous "0:N").
    pub major_minor: String,
    /// The directory of the filesystem mounted here ("/" unless a bind mount).
    pub root: String,
    pub mount_point: String,
    /// Per-mount options as the kernel writes them (`rw,noatime`). Escapes are kept in both
    /// option fields: an escaped comma inside a value must stay apart from the separators.
    pub options: String,
    pub fs_type: String,
    /// Mount source, e.g. "/dev/sda1" or "overlay".
    pub source: String,
    /// Filesystem options (`rw,errors=remount-ro`); "" when the line has none.
    pub super_options: String,
    /// The line had its options and ` - FSTYPE SOURCE` (the kernel always writes them).
    /// Readers that report a mount's filesystem skip incomplete lines; readers that look
    /// for a device in use keep them (by major:minor), since "not mounted" must not be a guess.
    pub complete: bool,
}

/// Every line with at least the five fields up to the mount point, in file order (a later
/// mount on the same point hides an earlier one). Shorter lines are ignored rather than
/// fatal: a mount that cannot be read cannot be matched either way, and the rest stay useful.
/// Root, mount point, filesystem type and source are unescaped.
pub(crate) fn parse(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_line).collect()
}

/// Reads and parses the mountinfo file at `path`.
pub(crate) fn read(path: &Path) -> std::io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read_to_string(path)?))
}

fn parse_line(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    if fields.len() < 5 {
        return None;
    }
    let after = |i: usize| -> Option<&str> {
        let dash = fields.iter().position(|f| *f == "-")?;
        fields.get(dash + i).copied()
    };
    let options = fields.get(5).copied();
    let (fs_type, source) = (after(1), after(2));
    Some(Mount {
        major_minor: fields[2].to_string(),
        root: unescape_octal(fields[3]),
        mount_point: unescape_octal(fields[4]),
        options: options.unwrap_or_default().to_string(),
        fs_type: fs_type.map(unescape_octal).unwrap_or_default(),
        source: source.map(unescape_octal).unwrap_or_default(),
        super_options: after(3).unwrap_or_default().to_string(),
        complete: options.is_some() && fs_type.is_some() && source.is_some(),
    })
}

/// Undoes the kernel's `\ooo` escaping of space, tab, newline and backslash (any three
/// octal digits up to `\377`); anything else is left as it is.
pub(crate) fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(b) = u8::try_from(value) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes() {
        assert_eq!(
            unescape_octal(r"/mnt/a\040b\011c\134d\012e"),
            "/mnt/a b\tc\\d\ne"
        );
        // Not an escape: left alone.
        assert_eq!(unescape_octal(r"/x\09"), r"/x\09");
        assert_eq!(unescape_octal(r"/x\089y"), r"/x\089y");
        assert_eq!(unescape_octal(r"/x\"), r"/x\");
    }

    #[test]
    fn every_field() {
        let m = parse(
            "36 35 98:0 /mnt1 /mnt\\0402 rw,noatime master:1 - ext3 /dev/r\\040t rw,errors=continue\n",
        );
        assert_eq!(
            m,
            vec![Mount {
                major_minor: "98:0".into(),
                root: "/mnt1".into(),
                mount_point: "/mnt 2".into(),
                options: "rw,noatime".into(),
                fs_type: "ext3".into(),
                source: "/dev/r t".into(),
                super_options: "rw,errors=continue".into(),
                complete: true,
            }]
        );
    }

    #[test]
    fn short_lines() {
        let m = parse(
            "1 2 3:4 /\n1 2 3:4 / /a\n1 2 3:4 / /b rw - ext4\n1 2 3:4 / /c rw - ext4 /dev/x\n",
        );
        let got: Vec<(&str, &str, bool)> = m
            .iter()
            .map(|m| (m.mount_point.as_str(), m.source.as_str(), m.complete))
            .collect();
        assert_eq!(
            got,
            vec![("/a", "", false), ("/b", "", false), ("/c", "/dev/x", true)]
        );
    }
}
