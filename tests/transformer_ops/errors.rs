//! Bad shapes and types are errors with useful messages; op names; empty
//! tensors.

use super::*;

#[test]
fn bad_shapes_and_types_are_errors() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor(DType::F32, &[8, 4, 3]).unwrap();
    let pos3 = ctx.new_tensor_1d(DType::I32, 3).unwrap();
    let pos4 = ctx.new_tensor_1d(DType::I32, 4).unwrap();
    let posf = ctx.new_tensor_1d(DType::F32, 3).unwrap();
    let pos2d = ctx.new_tensor_2d(DType::I32, 3, 2).unwrap();
    let shape = |r: rgml::Result<TensorId>| matches!(r, Err(Error::Shape { .. }));
    // rope
    assert!(ctx.rope(a, pos3, 8, 0).is_ok());
    assert!(shape(ctx.rope(a, pos4, 8, 0)), "positions of the wrong length");
    assert!(shape(ctx.rope(a, pos2d, 8, 0)), "positions not a vector");
    assert!(matches!(ctx.rope(a, posf, 8, 0), Err(Error::DTypeMismatch { .. })), "F32 positions");
    assert!(shape(ctx.rope(a, pos3, 7, 0)), "odd n_dims");
    assert!(shape(ctx.rope(a, pos3, 10, 0)), "n_dims > head_dim");
    assert!(shape(ctx.rope(a, pos3, 0, 0)), "n_dims 0");
    assert!(matches!(ctx.rope(a, pos3, 8, 1), Err(Error::Invalid(_))), "mode 1 (removed from ggml)");
    assert!(matches!(ctx.rope(a, pos3, 8, 8), Err(Error::Invalid(_))), "mrope is not implemented");
    let ff_short = ctx.new_tensor_1d(DType::F32, 3).unwrap();
    let ff_f16 = ctx.new_tensor_1d(DType::F16, 4).unwrap();
    let p = RopeParams::new(8, 0);
    assert!(shape(ctx.rope_with(a, pos3, Some(ff_short), p)), "freq_factors too short");
    assert!(matches!(ctx.rope_with(a, pos3, Some(ff_f16), p), Err(Error::DTypeMismatch { .. })));
    let q = ctx.new_tensor(DType::Q8_0, &[32, 2, 3]).unwrap();
    assert!(matches!(ctx.rope(q, pos3, 8, 0), Err(Error::Unsupported { .. })));
    let ai = ctx.new_tensor(DType::I32, &[8, 4, 3]).unwrap();
    assert!(matches!(ctx.rope(ai, pos3, 8, 0), Err(Error::Unsupported { .. })));
    // soft_max
    let m_few_rows = ctx.new_tensor(DType::F32, &[8, 3]).unwrap();
    let m_ne0 = ctx.new_tensor(DType::F32, &[7, 4]).unwrap();
    let m_bcast = ctx.new_tensor(DType::F32, &[8, 4, 2]).unwrap();
    let m_i32 = ctx.new_tensor(DType::I32, &[8, 4]).unwrap();
    let m_ok = ctx.new_tensor(DType::F16, &[8, 6, 1]).unwrap();
    assert!(ctx.soft_max_ext(a, Some(m_ok), 0.5, 2.0).is_ok());
    assert!(shape(ctx.soft_max_ext(a, Some(m_few_rows), 1.0, 0.0)), "mask with too few rows");
    assert!(shape(ctx.soft_max_ext(a, Some(m_ne0), 1.0, 0.0)), "mask ne0 != a.ne0");
    assert!(shape(ctx.soft_max_ext(a, Some(m_bcast), 1.0, 0.0)), "a.ne2 % mask.ne2 != 0");
    assert!(matches!(ctx.soft_max_ext(a, Some(m_i32), 1.0, 0.0), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.soft_max_ext(a, None, 1.0, 8.0), Err(Error::Invalid(_))), "ALiBi without a mask");
    assert!(matches!(ctx.soft_max(ai), Err(Error::Unsupported { .. })));
    // norms
    assert!(matches!(ctx.rms_norm(ai, 1e-5), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.norm(q, 1e-5), Err(Error::Unsupported { .. })));
    assert!(matches!(ctx.rms_norm(a, -1.0), Err(Error::Invalid(_))));
    assert!(matches!(ctx.norm(a, f32::NAN), Err(Error::Invalid(_))));
    // diag_mask_inf
    assert!(matches!(ctx.diag_mask_inf(a, -1), Err(Error::Invalid(_))));
    assert!(matches!(ctx.diag_mask_inf_inplace(ai, 0), Err(Error::Unsupported { .. })));
    // concat
    let b = ctx.new_tensor(DType::F32, &[8, 5, 3]).unwrap();
    let b16 = ctx.new_tensor(DType::F16, &[8, 4, 3]).unwrap();
    assert!(ctx.concat(a, b, 1).is_ok());
    assert!(shape(ctx.concat(a, b, 0)), "concat with a mismatched other dim");
    assert!(shape(ctx.concat(a, b, 2)));
    assert!(matches!(ctx.concat(a, b16, 1), Err(Error::DTypeMismatch { .. })));
    assert!(matches!(ctx.concat(a, a, 4), Err(Error::Invalid(_))));
    assert!(matches!(ctx.concat(q, q, 1), Err(Error::Unsupported { .. })));
    // repeat
    let big = ctx.new_tensor(DType::F32, &[16, 8, 3]).unwrap();
    let odd = ctx.new_tensor(DType::F32, &[12, 8, 3]).unwrap();
    assert!(ctx.repeat(a, big).is_ok());
    assert!(shape(ctx.repeat(a, odd)), "12 is not a multiple of 8");
    assert!(shape(ctx.repeat(big, a)), "repeat cannot shrink");
    assert!(matches!(ctx.repeat(q, q), Err(Error::Unsupported { .. })));
    // messages name the shapes
    let msg = ctx.soft_max_ext(a, Some(m_few_rows), 1.0, 0.0).unwrap_err().to_string();
    assert!(msg.contains("[8, 3, 1, 1]") && msg.contains("[8, 4, 3, 1]"), "{msg}");
}

/// Ops names, and empty tensors run without touching memory.
#[test]
fn names_and_empty_tensors() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor(DType::F32, &[4, 0, 2]).unwrap();
    let b = ctx.new_tensor(DType::F32, &[4, 0, 2]).unwrap();
    let ops = [
        (ctx.rms_norm(a, 1e-5).unwrap(), "rms_norm"),
        (ctx.norm(a, 1e-5).unwrap(), "norm"),
        (ctx.soft_max(a).unwrap(), "soft_max"),
        (ctx.diag_mask_inf(a, 0).unwrap(), "diag_mask_inf"),
        (ctx.concat(a, b, 1).unwrap(), "concat"),
        (ctx.repeat(a, b).unwrap(), "repeat"),
    ];
    for (id, name) in ops {
        assert_eq!(ctx.tensor(id).unwrap().op().name(), name);
        assert!(run(&ctx, id, 2).is_empty());
    }
}
