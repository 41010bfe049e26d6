//! Device targets and array placement (LANGUAGE §14).

use std::fmt;

use mlpl_devices::DeviceKind;

/// A device a computation can be placed on: `cpu`, `cuda`, `cuda:N` or `mlx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceTarget {
    /// The backend kind.
    pub kind: DeviceKind,
    /// The device number (only meaningful for CUDA).
    pub index: usize,
}

impl DeviceTarget {
    /// The host CPU.
    pub const CPU: DeviceTarget = DeviceTarget {
        kind: DeviceKind::Cpu,
        index: 0,
    };

    /// Parses a target string; `None` for anything not in LANGUAGE §14.1.
    pub fn parse(s: &str) -> Option<DeviceTarget> {
        match s {
            "cpu" => Some(DeviceTarget::CPU),
            "mlx" => Some(DeviceTarget {
                kind: DeviceKind::Mlx,
                index: 0,
            }),
            "cuda" => Some(DeviceTarget {
                kind: DeviceKind::Cuda,
                index: 0,
            }),
            _ => {
                let n = s.strip_prefix("cuda:")?;
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n.len() > 6 {
                    return None;
                }
                Some(DeviceTarget {
                    kind: DeviceKind::Cuda,
                    index: n.parse().ok()?,
                })
            }
        }
    }
}

impl fmt::Display for DeviceTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.index) {
            (DeviceKind::Cuda, 0) => write!(f, "cuda"),
            (DeviceKind::Cuda, n) => write!(f, "cuda:{n}"),
            (k, _) => write!(f, "{}", k.name()),
        }
    }
}

/// Where an array lives logically (LANGUAGE §14.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Lives wherever it was computed; moves freely.
    #[default]
    Floating,
    /// Explicitly placed by `to_device`.
    Placed(DeviceTarget),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        assert_eq!(DeviceTarget::parse("cpu"), Some(DeviceTarget::CPU));
        assert_eq!(DeviceTarget::parse("cuda:2").unwrap().index, 2);
        assert_eq!(DeviceTarget::parse("cuda:2").unwrap().to_string(), "cuda:2");
        assert_eq!(DeviceTarget::parse("cuda").unwrap().to_string(), "cuda");
        assert_eq!(DeviceTarget::parse("gpu"), None);
        assert_eq!(DeviceTarget::parse("cuda:"), None);
        assert_eq!(DeviceTarget::parse("cuda:x"), None);
    }
}
