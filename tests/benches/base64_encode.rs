//! wexec's base64 encoder (`wexec-base64`: AVX-512 VBMI where the CPU has it) against
//! base64-simd's, on a 64 KiB output chunk and a 1 MiB file: medians of 50 batches each,
//! alternating.
//!
//! Run: `cargo bench -p wexec-tests --bench base64_encode`.

#![expect(clippy::print_stdout, reason = "benchmark binary")]

use std::time::{Duration, Instant};

const BATCHES: usize = 50;
const PER_BATCH: u32 = 20;

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

fn main() {
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[2])
        .collect();
    let mut ours = String::new();
    wexec_base64::encode_append(&data, &mut ours);
    assert_eq!(ours, base64_simd::STANDARD.encode_to_string(&data));
    for size in [64 * 1024, 1 << 20] {
        let input = &data[..size];
        let mut out = String::with_capacity(wexec_base64::encoded_len(size));
        let (mut wexec, mut simd) = (Vec::new(), Vec::new());
        for _ in 0..BATCHES {
            let began = Instant::now();
            for _ in 0..PER_BATCH {
                out.clear();
                wexec_base64::encode_append(input, &mut out);
                std::hint::black_box(&out);
            }
            wexec.push(began.elapsed() / PER_BATCH);
            let began = Instant::now();
            for _ in 0..PER_BATCH {
                out.clear();
                base64_simd::STANDARD.encode_append(input, &mut out);
                std::hint::black_box(&out);
            }
            simd.push(began.elapsed() / PER_BATCH);
        }
        let (wexec, simd) = (median(wexec), median(simd));
        println!(
            "{} KiB: wexec-base64 {:.1} µs, base64-simd {:.1} µs ({:.2}x)",
            size / 1024,
            wexec.as_secs_f64() * 1e6,
            simd.as_secs_f64() * 1e6,
            simd.as_secs_f64() / wexec.as_secs_f64()
        );
    }
}
