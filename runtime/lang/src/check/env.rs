//! The checker's environment: what is known about each variable at a point of the
//! program (one flat scope, LANGUAGE §6.4), and the joins that loops need.

pub use rustc_hash::{FxHashMap, FxHashSet};

use super::abstract_value::AbsValue;

/// A three-valued truth: proven, disproven, or not known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tri {
    /// Provably true.
    Yes,
    /// Provably false.
    No,
    /// Not known.
    Maybe,
}

impl Tri {
    /// What is known when either `self` or `other` holds.
    pub fn join(self, other: Tri) -> Tri {
        if self == other {
            self
        } else {
            Tri::Maybe
        }
    }
}

/// What is known about one variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    /// Its value.
    pub value: AbsValue,
    /// Whether it is a tracked parameter (LANGUAGE §5.7).
    pub tracked: Tri,
}

impl Binding {
    /// What is known when the variable holds either binding.
    pub fn join(&self, other: &Binding) -> Binding {
        Binding {
            value: self.value.join(&other.value),
            tracked: self.tracked.join(other.tracked),
        }
    }
}

/// The variables bound at a program point.
#[derive(Clone, Debug, Default)]
pub struct Env {
    map: FxHashMap<String, Binding>,
}

/// The bindings of some variables at one point (a loop's snapshot); `None` for a
/// variable not bound there.
pub type Snapshot = Vec<(String, Option<Binding>)>;

impl Env {
    /// The binding of `name`.
    pub fn get(&self, name: &str) -> Option<&Binding> {
        self.map.get(name)
    }

    /// Binds `name` to `value` with the tracking rules of LANGUAGE §5.7: `param`
    /// is true when the right-hand side was syntactically `param[...]`.
    pub fn assign(&mut self, name: &str, value: AbsValue, param: bool) {
        let old = self.map.get(name).map(|b| b.tracked);
        let tracked = if param {
            Tri::Yes
        } else {
            match &value {
                AbsValue::Array(_) => old.unwrap_or(Tri::No),
                AbsValue::Unknown => match old {
                    Some(Tri::Yes) | Some(Tri::Maybe) => Tri::Maybe,
                    _ => Tri::No,
                },
                _ => Tri::No,
            }
        };
        match self.map.get_mut(name) {
            Some(b) => *b = Binding { value, tracked },
            None => {
                self.map
                    .insert(name.to_string(), Binding { value, tracked });
            }
        }
    }

    /// Replaces the value of `name` keeping its tracking (a re-binding done by a
    /// builtin, like `to_device` of a bare variable).
    pub fn rebind(&mut self, name: &str, value: AbsValue) {
        let tracked = self.map.get(name).map_or(Tri::No, |b| b.tracked);
        self.map
            .insert(name.to_string(), Binding { value, tracked });
    }

    /// The current bindings of `names`.
    pub fn snapshot(&self, names: &[String]) -> Snapshot {
        names
            .iter()
            .map(|n| (n.clone(), self.map.get(n).cloned()))
            .collect()
    }

    /// Restores a snapshot.
    pub fn restore(&mut self, snap: &Snapshot) {
        for (n, b) in snap {
            match b {
                Some(b) => {
                    self.map.insert(n.clone(), b.clone());
                }
                None => {
                    self.map.remove(n);
                }
            }
        }
    }

    /// Joins two snapshots of the same names: a variable bound in only one of them
    /// is unknown (it may be unbound: reading it is reported by the name checker).
    pub fn join_snapshots(a: &Snapshot, b: &Snapshot) -> Snapshot {
        a.iter()
            .zip(b)
            .map(|((n, x), (_, y))| {
                let j = match (x, y) {
                    (Some(x), Some(y)) => Some(x.join(y)),
                    (Some(x), None) | (None, Some(x)) => Some(Binding {
                        value: AbsValue::Unknown,
                        tracked: x.tracked.join(Tri::No),
                    }),
                    (None, None) => None,
                };
                (n.clone(), j)
            })
            .collect()
    }

    /// Every variable name bound here.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(|s| s.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_follows_section_5_7() {
        let mut env = Env::default();
        env.assign("W", AbsValue::any_array(), true);
        env.assign("W", AbsValue::any_array(), false);
        assert_eq!(env.get("W").unwrap().tracked, Tri::Yes);
        env.assign("W", AbsValue::Str(None), false);
        assert_eq!(env.get("W").unwrap().tracked, Tri::No);
        env.assign("x", AbsValue::any_scalar(), false);
        assert_eq!(env.get("x").unwrap().tracked, Tri::No);
    }

    #[test]
    fn snapshots_join() {
        let mut env = Env::default();
        env.assign("a", AbsValue::scalar(1.0), false);
        let names = vec!["a".to_string(), "b".to_string()];
        let s1 = env.snapshot(&names);
        env.assign("a", AbsValue::scalar(2.0), false);
        env.assign("b", AbsValue::scalar(2.0), false);
        let s2 = env.snapshot(&names);
        let j = Env::join_snapshots(&s1, &s2);
        assert_eq!(j[0].1.as_ref().unwrap().value, AbsValue::any_scalar());
        assert_eq!(j[1].1.as_ref().unwrap().value, AbsValue::Unknown);
    }
}
