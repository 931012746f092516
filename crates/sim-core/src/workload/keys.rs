//! Token-stream keys: which tokens of different prompts are the same (see [`Segment`]).
//!
//! Every source of shared content has its own namespace, and a key is a 64-bit mix of the
//! namespace and the source's own identifiers (a group name, a Mooncake hash id, a session
//! and turn), so two sources never produce the same key unless they name the same content:
//! a `prefix_group = "sys"` never collides with a `hash_ids` block or a generated group.
//! The mix is SplitMix64's finalizer over FNV-1a for strings: fixed arithmetic, the same on
//! every platform, no per-process random state (determinism). The top bit is cleared so a
//! workload key is never an output key ([`OUTPUT_KEY_BIT`]).

use super::{Segment, OUTPUT_KEY_BIT};

/// The namespaces of workload keys (never reorder: keys are part of the results' bytes
/// once prefix caching reads them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Ns {
    /// `requests[i].prefix_group` (and trace prefix-group columns): the group's name.
    PrefixGroup = 1,
    /// `hash_ids` (Mooncake's convention): one id per block of `hash_block_tokens`.
    HashId = 2,
    /// The new tokens of one turn of an explicit or traced session: (session, turn).
    SessionTurn = 3,
    /// `shared_prefix`: a group's system prompt, by group index.
    SharedSystem = 4,
    /// `shared_prefix`: one user's question, by (group, user).
    SharedQuestion = 5,
    /// `sessions`: one generated turn's question, by (session, turn).
    GeneratedTurn = 6,
}

/// SplitMix64's output function: a bijective avalanche of 64 bits.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key of content `(a, b)` in namespace `ns`.
pub(crate) const fn key(ns: Ns, a: u64, b: u64) -> u64 {
    mix(mix(mix(ns as u64 ^ 0x6f31_7369_6d00_0000) ^ a).wrapping_add(b)) & !OUTPUT_KEY_BIT
}

/// The key of a named content in namespace `ns` (FNV-1a over the UTF-8 bytes, then mixed).
pub(crate) fn key_str(ns: Ns, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name.as_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    key(ns, h, name.len() as u64)
}

/// Push the blocks of a `hash_ids` list covering a prompt of `prompt_tokens` tokens: one
/// segment of `block_tokens` per id, the last one holding what remains.
pub(crate) fn push_hash_blocks(arena: &mut Vec<Segment>, ids: impl IntoIterator<Item = u64>, prompt_tokens: u32, block_tokens: u32) {
    let mut left = prompt_tokens;
    for id in ids {
        let len = left.min(block_tokens);
        arena.push(Segment { key: key(Ns::HashId, id, 0), len });
        left -= len;
    }
}

/// The number of `block_tokens` blocks a prompt of `prompt_tokens` tokens spans.
pub(crate) fn blocks_for(prompt_tokens: u32, block_tokens: u32) -> u64 {
    u64::from(prompt_tokens).div_ceil(u64::from(block_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_names_separate_keys() {
        let a = key(Ns::HashId, 7, 0);
        assert_ne!(a, key(Ns::PrefixGroup, 7, 0));
        assert_ne!(a, key(Ns::HashId, 8, 0));
        assert_eq!(a, key(Ns::HashId, 7, 0));
        assert_ne!(key_str(Ns::PrefixGroup, "a"), key_str(Ns::PrefixGroup, "b"));
        assert_ne!(key_str(Ns::PrefixGroup, "ab"), key_str(Ns::SessionTurn, "ab"));
        for k in [a, key_str(Ns::PrefixGroup, "x"), key(Ns::GeneratedTurn, u64::MAX, u64::MAX)] {
            assert_eq!(k & OUTPUT_KEY_BIT, 0);
        }
    }

    #[test]
    fn hash_blocks_cover_the_prompt_with_a_partial_last_block() {
        let mut arena = Vec::new();
        push_hash_blocks(&mut arena, [1, 2, 3], 1100, 512);
        assert_eq!(arena.iter().map(|s| s.len).collect::<Vec<_>>(), [512, 512, 76]);
        assert_eq!(blocks_for(1100, 512), 3);
        assert_eq!(blocks_for(1024, 512), 2);
    }
}
