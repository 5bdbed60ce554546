//! `kernels/iq_grids.cuh`, the i-quant grids on the device, is generated from
//! the CPU's tables (`src/quant/iq_grids.rs`, `src/quant/iq1s_grid.rs`): the
//! test below fails when the two differ, and with `RGML_REGENERATE_KERNELS=1`
//! rewrites the file.

/// The text of `kernels/iq_grids.cuh` for the CPU's tables.
#[cfg(test)]
fn iq_grids_source() -> String {
    use crate::quant::iq_tables as t;
    use std::fmt::Write as _;
    let mut s = String::from(
        "// The i-quant grids on the device: GENERATED from src/quant/iq_grids.rs and\n\
         // src/quant/iq1s_grid.rs by src/backend/cuda/grids.rs (RGML_REGENERATE_KERNELS=1\n\
         // cargo test -p rgml --lib grids); do not edit.\n",
    );
    let mut table = |name: &str, ty: &str, vals: Vec<String>| {
        let _ = writeln!(s, "__constant__ {ty} {name}[{}] = {{", vals.len());
        for row in vals.chunks(8) {
            let _ = writeln!(s, "    {},", row.join(", "));
        }
        s.push_str("};\n");
    };
    let hex64 = |v: &[u64]| v.iter().map(|x| format!("0x{x:016x}ull")).collect();
    let hex32 = |v: &[u32]| v.iter().map(|x| format!("0x{x:08x}u")).collect();
    table("rgq_ksigns_iq2xs", "unsigned char", t::KSIGNS_IQ2XS.iter().map(|x| x.to_string()).collect());
    table("rgq_iq2xxs_grid", "unsigned long long", hex64(&t::IQ2XXS_GRID));
    table("rgq_iq2xs_grid", "unsigned long long", hex64(&t::IQ2XS_GRID));
    table("rgq_iq2s_grid", "unsigned long long", hex64(&t::IQ2S_GRID));
    table("rgq_iq3xxs_grid", "unsigned int", hex32(&t::IQ3XXS_GRID));
    table("rgq_iq3s_grid", "unsigned int", hex32(&t::IQ3S_GRID));
    table("rgq_iq1s_grid", "unsigned long long", hex64(&t::IQ1S_GRID));
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_device_grids_are_the_cpu_tables() {
        let want = super::iq_grids_source();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/iq_grids.cuh");
        if std::env::var("RGML_REGENERATE_KERNELS").is_ok_and(|v| v == "1") {
            let tmp = path.with_extension("cuh.tmp");
            std::fs::write(&tmp, &want).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap();
        assert!(
            got == want,
            "kernels/iq_grids.cuh differs from the CPU's tables: regenerate it (see src/backend/cuda/grids.rs)"
        );
        assert!(got == super::super::kernels::IQ_GRIDS, "the embedded copy is stale: rebuild");
    }
}
