//! `RGML_SIMD` caps the CPU kernels' instruction-set level (read once per
//! process, so each case runs this test binary again as a child).

use rgml::quant::dot::SimdLevel;

const CHILD: &str = "RGML_SIMD_TEST_EXPECT";

/// The best level this CPU supports at or below `cap`.
fn best_up_to(cap: SimdLevel) -> SimdLevel {
    SimdLevel::ALL.into_iter().rev().find(|&l| l <= cap && l.is_supported()).unwrap_or(SimdLevel::Scalar)
}

#[test]
fn rgml_simd_caps_the_kernels_level() {
    if let Ok(want) = std::env::var(CHILD) {
        let level = SimdLevel::detect();
        assert_eq!(level.name(), want, "RGML_SIMD={:?}", std::env::var("RGML_SIMD"));
        let cpu = rgml::CpuBackend::new(1).unwrap();
        assert!(format!("{cpu:?}").contains(&want), "{cpu:?} names its level");
        // a product through the capped kernels still computes
        let mut ctx = rgml::Context::new();
        let a = ctx.new_f32(&[64, 3], &(0..192).map(|i| (i % 7) as f32).collect::<Vec<_>>()).unwrap();
        let b = ctx.new_f32(&[64, 2], &(0..128).map(|i| (i % 5) as f32 - 2.0).collect::<Vec<_>>()).unwrap();
        let c = ctx.mul_mat(a, b).unwrap();
        let g = rgml::Graph::build(&ctx, &[c]).unwrap();
        let st = cpu.run(&ctx, &g).unwrap();
        let got = st.read_f32(&ctx, c).unwrap();
        for (j, i) in (0..2).flat_map(|j| (0..3).map(move |i| (j, i))) {
            let want: f64 = (0..64).map(|k| ((i * 64 + k) % 7) as f64 * (((j * 64 + k) % 5) as f64 - 2.0)).sum();
            assert_eq!(got[j * 3 + i] as f64, want, "row {i}, column {j}");
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let cases = [
        ("scalar", best_up_to(SimdLevel::Scalar)),
        ("AVX2", best_up_to(SimdLevel::Avx2)),
        ("avx512", best_up_to(SimdLevel::Avx512)),
        ("sse9", best_up_to(SimdLevel::Avx512)),
    ];
    for (cap, want) in cases {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "rgml_simd_caps_the_kernels_level", "--test-threads", "1", "--nocapture"])
            .env("RGML_SIMD", cap)
            .env(CHILD, want.name())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "RGML_SIMD={cap}: {}{stderr}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(SimdLevel::parse(cap).is_none(), stderr.contains("is not scalar, avx2 or avx512"), "{stderr}");
    }
}
