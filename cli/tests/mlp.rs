//! The MLP: its plan matches ggml's gallocr on the reference graph, and its
//! forward pass matches an f64 reference, planned and in poison mode.

use rgml::{Allocator, CpuBackend, CpuRules, Plan, CPU_ALIGNMENT};
use rgml_models::mlp::Mlp;

#[test]
fn plan_of_the_reference_mlp_is_no_larger_than_ggml() {
    // ggml's gallocr reserves 1,048,576 B for this graph; naive is input + 5 intermediates
    let m = Mlp::build(4096, 4096, 32).unwrap();
    let plan = Allocator::new(CpuRules).plan(&m.ctx, &m.graph).unwrap();
    plan.verify(&m.ctx, &m.graph, &CpuRules).unwrap();
    let s = plan.stats();
    assert_eq!(s.naive, 3_145_728);
    assert!(s.planned <= 1_048_576, "{s:?}");
    assert_eq!(s.lower_bound, 1_048_576);
    assert_eq!(plan.buffer_size(), s.planned);
    // add, gelu and the last add each wrote over their source
    let nodes = m.graph.nodes();
    assert_eq!(plan.reused_source(nodes[1]), Some(nodes[0]));
    assert_eq!(plan.reused_source(nodes[2]), Some(nodes[1]));
    assert_eq!(plan.reused_source(nodes[3]), None, "mul_mat never writes over a source");
    assert_eq!(plan.reused_source(nodes[4]), Some(nodes[3]));
    let dot = m.graph.to_dot(&m.ctx, Some(&|id| plan.annotation(&m.ctx, id))).unwrap();
    assert!(dot.contains("@0+524288") && dot.contains("@524288+524288"), "{dot}");
}

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
}

#[test]
fn forward_matches_f64_reference() {
    let (e, h, n) = (37usize, 53usize, 5usize);
    let mut m = Mlp::build(e as i64, h as i64, n as i64).unwrap();
    let mut seed = 7;
    let mut fill = |len: usize| (0..len).map(|_| lcg(&mut seed)).collect::<Vec<f32>>();
    let (x, w1, b1, w2, b2) = (fill(e * n), fill(e * h), fill(h), fill(h * e), fill(e));
    for (id, v) in [(m.x, &x), (m.w1, &w1), (m.b1, &b1), (m.w2, &w2), (m.b2, &b2)] {
        m.ctx.set_data(id, v).unwrap();
    }
    // ggml's CPU GELU, which rgml's is: from the input rounded to f16, rounded to f16
    let f16 = |v: f64| rgml::f16::from_f64(v).to_f64();
    let gelu = |v: f64| {
        let h = f16(v);
        f16(0.5 * h * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (h + 0.044715 * h * h * h)).tanh()))
    };
    let mut want = vec![0f64; e * n];
    for t in 0..n {
        let hid: Vec<f64> = (0..h)
            .map(|j| gelu((0..e).map(|k| w1[j * e + k] as f64 * x[t * e + k] as f64).sum::<f64>() + b1[j] as f64))
            .collect();
        for i in 0..e {
            want[t * e + i] = (0..h).map(|j| w2[i * h + j] as f64 * hid[j]).sum::<f64>() + b2[i] as f64;
        }
    }
    for threads in [1, 2] {
        let cpu = CpuBackend::new(threads).unwrap().with_poison(true);
        for plan in [
            Allocator::new(CpuRules).plan(&m.ctx, &m.graph).unwrap(),
            Plan::naive(&m.ctx, &m.graph, CPU_ALIGNMENT).unwrap(),
        ] {
            let mut st = cpu.alloc(&m.ctx, &m.graph, plan).unwrap();
            cpu.compute(&m.ctx, &m.graph, &mut st).unwrap();
            let got = st.read_f32(&m.ctx, m.out).unwrap();
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                // one f16 step of a hidden value (2^-10 relative) can separate the two GELUs
                assert!((g as f64 - w).abs() <= 2e-4 * (1.0 + w.abs()), "[{i}] {g} vs {w}");
            }
        }
    }
}

#[test]
fn cli_plan_reports_the_mlp() {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_rgml")).arg("plan").output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert!(stdout.contains("mlp n=32: naive 3145728 B, planned 1048576 B, lower bound 1048576 B"), "{stdout}");
    // the seeds' .to("cuda") and back: two priced transfer nodes of 64 MiB
    assert!(stdout.contains("transfer: h2d 67108864 B cpu→cuda:0 (pinned)"), "{stdout}");
    assert!(stdout.contains("transfer: d2h 67108864 B cuda:0→cpu (pinned)"), "{stdout}");
}
