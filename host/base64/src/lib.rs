//! Base64 (standard alphabet, padded) for the wire: every `process/output` chunk and every
//! `fs/readFile` `dataBase64` is encoded here (docs/protocol.md §7.1).
//!
//! Encoding is a large share of wexec's own work on those paths. Where the CPU has AVX-512
//! VBMI, whole 48-byte blocks go through the three-instruction loop of Muła and Lemire ("Base64
//! encoding and decoding at almost the speed of a memory copy", 2019), well ahead of
//! base64-simd's, which shows in wexec's own CPU time per large `fs/readFile`
//! (`cargo bench -p wexec-tests --bench base64_encode`; docs/performance.md). A stream's
//! chunks gain less: each is encoded into a fresh line, so the stores bound it. What is left over (and everything, on other CPUs) is base64-simd's; the tests hold the
//! two to the same bytes.

/// The data `text` encodes (the MCP face reads file contents and process output back from
/// the wire form): base64-simd's decoder, which uses the CPU's vector units where it has them.
pub fn decode(text: &str) -> Result<Vec<u8>, DecodeError> {
    base64_simd::STANDARD
        .decode_to_vec(text)
        .map_err(|_| DecodeError)
}

/// A text that is no padded standard base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError;

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not padded standard base64")
    }
}

impl std::error::Error for DecodeError {}

/// How long `bytes` of data are once encoded.
pub const fn encoded_len(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4
}

/// Appends the encoding of `bytes` to `out`.
pub fn encode_append(bytes: &[u8], out: &mut String) {
    out.reserve(encoded_len(bytes.len()));
    #[cfg(target_arch = "x86_64")]
    let bytes = &bytes[vbmi::encode_blocks(bytes, out)..];
    base64_simd::STANDARD.encode_append(bytes, out);
}

#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "SIMD loads and stores through raw pointers, bounded as each block says, and the call of a target_feature function after the CPU was asked"
)]
mod vbmi {
    use std::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_multishift_epi64_epi8, _mm512_permutexvar_epi8,
        _mm512_set1_epi64, _mm512_setr_epi32, _mm512_storeu_si512,
    };

    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    /// Each step loads 64 bytes and encodes the first 48 into 64.
    const LOADED: usize = 64;
    const TAKEN: usize = 48;
    const WRITTEN: usize = 64;

    /// Whether this CPU runs the loop (std caches the answer).
    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vbmi")
    }

    /// Appends the encoding of as many whole 48-byte blocks of `bytes` as can be loaded 64
    /// bytes at a time without reading past its end; the bytes encoded (a multiple of 3, so the
    /// rest encodes on its own). Nothing on a CPU without AVX-512 VBMI.
    pub fn encode_blocks(bytes: &[u8], out: &mut String) -> usize {
        if bytes.len() < LOADED || !available() {
            return 0;
        }
        // The last block starts at (blocks - 1) * 48 and loads up to blocks * 48 + 16 <= len.
        let blocks = (bytes.len() - (LOADED - TAKEN)) / TAKEN;
        let written = blocks * WRITTEN;
        out.reserve(written);
        // SAFETY: only ASCII from ALPHABET is written, so `out` stays UTF-8.
        let out = unsafe { out.as_mut_vec() };
        let spare = out.spare_capacity_mut();
        assert!(spare.len() >= written, "reserved above");
        // SAFETY: the CPU has the features (asked above); every load is within `bytes` (see
        // `blocks`) and every store within `spare` (asserted).
        unsafe { encode(bytes.as_ptr(), blocks, spare.as_mut_ptr().cast::<u8>()) };
        // SAFETY: the stores initialised exactly the first `written` spare bytes.
        unsafe { out.set_len(out.len() + written) };
        blocks * TAKEN
    }

    /// Encodes `blocks` blocks of 48 bytes at `input` (reading 64 bytes at each) into
    /// `blocks * 64` bytes at `output`.
    ///
    /// Safety: the CPU has AVX-512F and VBMI; `input + (blocks - 1) * 48 + 64` and
    /// `output + blocks * 64` are within their allocations.
    #[target_feature(enable = "avx512f,avx512vbmi")]
    unsafe fn encode(input: *const u8, blocks: usize, output: *mut u8) {
        // Spreads each 3 input bytes over a 4-byte lane, as bytes 1, 0, 2, 1: the 6-bit fields
        // then sit at bit offsets 10, 4, 22 and 16 of the lane (and 32 further on in its qword).
        let spread = _mm512_setr_epi32(
            0x0102_0001,
            0x0405_0304,
            0x0708_0607,
            0x0a0b_090a,
            0x0d0e_0c0d,
            0x1011_0f10,
            0x1314_1213,
            0x1617_1516,
            0x191a_1819,
            0x1c1d_1b1c,
            0x1f20_1e1f,
            0x2223_2122,
            0x2526_2425,
            0x2829_2728,
            0x2b2c_2a2b,
            0x2e2f_2d2e,
        );
        // Picks each byte's 8 bits at those offsets; the lookup uses the low 6.
        let fields = _mm512_set1_epi64(0x3036_242a_1016_040a);
        // SAFETY: ALPHABET is 64 bytes.
        let alphabet = unsafe { _mm512_loadu_si512(ALPHABET.as_ptr().cast::<__m512i>()) };
        for block in 0..blocks {
            // SAFETY: within `input` and `output` (the function's contract).
            let data = unsafe { _mm512_loadu_si512(input.add(block * TAKEN).cast::<__m512i>()) };
            let spread = _mm512_permutexvar_epi8(spread, data);
            let indices = _mm512_multishift_epi64_epi8(fields, spread);
            let text = _mm512_permutexvar_epi8(indices, alphabet);
            // SAFETY: as above.
            unsafe { _mm512_storeu_si512(output.add(block * WRITTEN).cast::<__m512i>(), text) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes covering every value.
    fn bytes(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state.to_le_bytes()[1]
            })
            .collect()
    }

    fn portable(bytes: &[u8]) -> String {
        base64_simd::STANDARD.encode_to_string(bytes)
    }

    #[test]
    fn every_length_around_the_block_edges_matches_the_portable_encoder() {
        for len in 0..=400 {
            for seed in 0..4 {
                let data = bytes(len, seed);
                let mut out = String::new();
                encode_append(&data, &mut out);
                assert_eq!(out, portable(&data), "{len} bytes, seed {seed}");
            }
        }
    }

    #[test]
    fn large_inputs_at_every_offset_match_and_append_after_what_was_there() {
        let data = bytes((1 << 20) + 100, 7);
        for start in 0..8 {
            for len in [65_536, 87_381, 1 << 20] {
                let slice = &data[start..start + len];
                let mut out = String::from(r#"{"chunk":""#);
                encode_append(slice, &mut out);
                assert_eq!(out, format!(r#"{{"chunk":"{}"#, portable(slice)));
            }
        }
    }

    #[test]
    fn decoding_gives_back_what_was_encoded_and_refuses_what_is_not_base64() {
        for len in [0, 1, 2, 3, 47, 48, 49, 4096, 100_003] {
            let data = bytes(len, 7);
            let mut text = String::new();
            encode_append(&data, &mut text);
            assert_eq!(decode(&text), Ok(data), "length {len}");
        }
        assert_eq!(decode("not base64!"), Err(DecodeError));
        assert_eq!(decode("QQ"), Err(DecodeError), "unpadded");
    }

    #[test]
    fn all_zero_and_all_one_bits_hit_both_ends_of_the_alphabet() {
        for byte in [0u8, 0xff, 0x80, 0x01] {
            let data = vec![byte; 1000];
            let mut out = String::new();
            encode_append(&data, &mut out);
            assert_eq!(out, portable(&data));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_loop_runs_where_the_cpu_has_it_and_stops_short_of_the_end() {
        let data = bytes(1000, 3);
        let mut out = String::new();
        let taken = vbmi::encode_blocks(&data, &mut out);
        if vbmi::available() {
            // (1000 - 16) / 48 = 20 blocks; the last one loads bytes 912..976.
            assert_eq!(taken, 960);
            assert_eq!(out, portable(&data[..960]));
        } else {
            assert_eq!((taken, out.as_str()), (0, ""));
        }
        assert_eq!(vbmi::encode_blocks(&data[..63], &mut String::new()), 0);
    }
}
