//! (the control plane) A 128-bit digest of a value, what inject's and uninject's read-back
//! compares so that the values asked for need not be kept while their text is read back; and
//! the same digest of a List document whose items were read one at a time
//! ([`tree::Part`](super::tree::Part)), from its items' digests.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

/// The two SipHash keys of a digest's halves.
const SEEDS: [u64; 2] = [1, 2];

/// A digest of a value, equal for values that are equal as `serde_json` compares them (a
/// mapping's keys in any order, `0.0` and `-0.0` alike, an integer never a float).
pub(crate) fn digest(v: &Value) -> u128 {
    join(SEEDS.map(|seed| value(v, seed, None)))
}

/// The digests of a List's items, in order, folded as they come: what its `items` sequence
/// adds to the List's digest ([`Items::of`]).
pub(crate) struct Items {
    halves: [DefaultHasher; 2],
    len: usize,
}

impl Items {
    pub(crate) fn new() -> Items {
        Items {
            halves: SEEDS.map(sequence),
            len: 0,
        }
    }

    /// Folds the next item in.
    pub(crate) fn push(&mut self, item: &Value) {
        for (h, seed) in self.halves.iter_mut().zip(SEEDS) {
            value(item, seed, None).hash(h);
        }
        self.len += 1;
    }

    /// The digest of `list` as it would be with the items folded in as its root `items`
    /// sequence (`list`'s own `items`, empty, left out): [`digest`] of the whole List.
    pub(crate) fn of(self, list: &Value) -> u128 {
        let len = self.len;
        let halves = self.halves.map(|mut h| {
            len.hash(&mut h);
            h.finish()
        });
        join([0, 1].map(|i| value(list, SEEDS[i], Some(halves[i]))))
    }
}

fn join([high, low]: [u64; 2]) -> u128 {
    (u128::from(high) << 64) | u128::from(low)
}

/// A sequence's hasher before its items: its items' digests follow, then their count.
fn sequence(seed: u64) -> DefaultHasher {
    let mut h = DefaultHasher::new();
    (seed, 6u8).hash(&mut h);
    h
}

/// One 64-bit half of [`digest`], its SipHash keyed by `seed`; at the root, `items` (when given)
/// stands for the digest of the root mapping's `items`.
fn value(v: &Value, seed: u64, items: Option<u64>) -> u64 {
    let mut h = DefaultHasher::new();
    seed.hash(&mut h);
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, b).hash(&mut h),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                (2u8, u).hash(&mut h);
            } else if let Some(i) = n.as_i64() {
                (3u8, i).hash(&mut h);
            } else {
                // `0.0 == -0.0`; JSON numbers are never NaN.
                let f = n.as_f64().unwrap_or_default();
                (4u8, if f == 0.0 { 0 } else { f.to_bits() }).hash(&mut h);
            }
        }
        Value::String(s) => (5u8, s).hash(&mut h),
        Value::Array(list) => {
            let mut h = sequence(seed);
            for item in list {
                value(item, seed, None).hash(&mut h);
            }
            list.len().hash(&mut h);
            return h.finish();
        }
        Value::Object(map) => {
            // Order-free: the sum of each entry's own hash.
            let entry = |key: &str, d: u64| {
                let mut e = DefaultHasher::new();
                (seed, key, d).hash(&mut e);
                e.finish()
            };
            let mut sum = 0u64;
            let mut len = map.len();
            for (key, v) in map {
                let d = match items {
                    Some(d) if key == "items" => d,
                    _ => value(v, seed, None),
                };
                sum = sum.wrapping_add(entry(key, d));
            }
            if let (Some(d), false) = (items, map.contains_key("items")) {
                // A List whose `items` went: the items are still its.
                sum = sum.wrapping_add(entry("items", d));
                len += 1;
            }
            (7u8, len, sum).hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A List's digest from its items, folded one at a time, is the digest of the whole List,
    /// and differs when an item, their order or their count differs.
    #[test]
    fn a_list_from_its_items_is_the_whole_list() {
        let items = [json!({"kind": "A"}), json!([1, 2]), json!("x"), json!(null)];
        for n in 0..=items.len() {
            let whole = json!({"apiVersion": "v1", "kind": "List", "items": items[..n]});
            let mut folded = Items::new();
            items[..n].iter().for_each(|i| folded.push(i));
            let wrapper = json!({"apiVersion": "v1", "kind": "List", "items": []});
            assert_eq!(folded.of(&wrapper), digest(&whole), "{n} items");
            // Without its `items` key at all: the same.
            let mut folded = Items::new();
            items[..n].iter().for_each(|i| folded.push(i));
            assert_eq!(
                folded.of(&json!({"apiVersion": "v1", "kind": "List"})),
                digest(&whole)
            );
        }
        let whole = digest(&json!({"kind": "List", "items": [1, 2]}));
        for other in [vec![2, 1], vec![1], vec![1, 2, 2], vec![1, 3]] {
            let mut folded = Items::new();
            other.iter().for_each(|i| folded.push(&json!(i)));
            assert_ne!(
                folded.of(&json!({"kind": "List", "items": []})),
                whole,
                "{other:?}"
            );
        }
    }
}
