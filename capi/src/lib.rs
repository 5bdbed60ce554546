//! rgml-capi: a small C ABI over rgml's DLPack bridge ([`rgml::dlpack`]).
//!
//! Built as a `cdylib`, it lets any language with a C FFI trade tensors with
//! rgml as `DLManagedTensor` pointers: Python wraps them in `"dltensor"`
//! capsules for `numpy.from_dlpack` and hands numpy's capsules back
//! (tests/numpy_dlpack.py, driven by tests/numpy.rs). Errors are reported by
//! a null pointer or a negative count, with the message in
//! [`rgml_last_error`].

use std::cell::RefCell;

use rgml::dlpack::{self, DLManagedTensor, DLManagedTensorVersioned};
use rgml::{f16, Context, CpuBackend, DType, Error, Graph, Result, TensorId};

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_error(e: &Error) {
    LAST_ERROR.with(|l| *l.borrow_mut() = e.to_string());
}

/// Copies the message of this thread's last error (NUL-terminated, cut to
/// `cap - 1` bytes) into `buf`; returns its full length in bytes.
///
/// # Safety
/// `buf` must be null or valid for writes of `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn rgml_last_error(buf: *mut u8, cap: usize) -> usize {
    LAST_ERROR.with(|l| {
        let msg = l.borrow();
        if !buf.is_null() && cap > 0 {
            let n = msg.len().min(cap - 1);
            // SAFETY: the caller's contract: `cap` writable bytes at `buf`; `n < cap`.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buf, n);
                *buf.add(n) = 0;
            }
        }
        msg.len()
    })
}

/// The demo tensors: (context, tensor, the run's storage if it is a result).
fn demo(kind: i32) -> Result<dlpack::ManagedTensor> {
    let mut ctx = Context::new();
    let a = ctx.new_f32(&[4, 3], &(0..12).map(|i| i as f32).collect::<Vec<_>>())?;
    let id: TensorId = match kind {
        // a 3x4 f32 matrix 0..12, its transpose, the 2x2 window at row 1, col 1
        0 => a,
        1 => ctx.transpose(a)?,
        2 => ctx.view_2d(a, 2, 2, 16, 5 * 4)?,
        // f16 2x3: i / 2
        3 => {
            let t = ctx.new_tensor(DType::F16, &[3, 2])?;
            ctx.set_data(t, &(0..6).map(|i| f16::from_f32(i as f32 / 2.)).collect::<Vec<_>>())?;
            t
        }
        // i32 2x3x4: 3i - 7, and its dims 0 and 2 swapped (numpy: shape (4, 3, 2))
        4 | 5 => {
            let t = ctx.new_tensor(DType::I32, &[4, 3, 2])?;
            ctx.set_data(t, &(0..24).map(|i| 3 * i - 7).collect::<Vec<i32>>())?;
            if kind == 4 {
                t
            } else {
                ctx.permute(t, [2, 1, 0, 3])?
            }
        }
        // the result of a CPU run, transposed: (a + [100, 200, 300, 400]) ^T
        6 => {
            let b = ctx.new_f32(&[4], &[100., 200., 300., 400.])?;
            let s = ctx.add(a, b)?;
            let st = ctx.transpose(s)?;
            ctx.set_output(st)?;
            let g = Graph::build(&ctx, &[st])?;
            let storage = CpuBackend::new(1)?.run(&ctx, &g)?;
            let mut out = dlpack::export_results(storage, &ctx, &[st])?;
            return out.pop().ok_or_else(|| Error::Invalid("no export".into()));
        }
        // a block type: refused
        7 => ctx.new_tensor(DType::Q8_0, &[32, 2])?,
        _ => return Err(Error::Invalid(format!("rgml_dlpack_demo_export: no demo tensor {kind}"))),
    };
    dlpack::export(&ctx, id)
}

/// Exports demo tensor `kind` (0: a 3x4 f32 matrix holding 0..12; 1: its
/// transpose; 2: its 2x2 window at row 1, column 1 (byte offset 20); 3: an
/// f16 2x3 matrix of i/2; 4: an i32 2x3x4 array of 3i-7; 5: that array with
/// its first and last dims swapped; 6: the transpose of the matrix plus
/// [100, 200, 300, 400] per row, as computed by a CPU run; 7: a Q8_0 tensor,
/// refused). The context that made it is gone: the managed tensor holds the
/// bytes. Null on error ([`rgml_last_error`]); the caller must call the
/// deleter once.
#[no_mangle]
pub extern "C" fn rgml_dlpack_demo_export(kind: i32) -> *mut DLManagedTensor {
    match demo(kind) {
        Ok(m) => m.into_raw(),
        Err(e) => {
            set_error(&e);
            std::ptr::null_mut()
        }
    }
}

/// [`rgml_dlpack_demo_export`] under the versioned ABI (DLPack 1.0, the
/// `"dltensor_versioned"` capsule; flagged read-only).
#[no_mangle]
pub extern "C" fn rgml_dlpack_demo_export_versioned(kind: i32) -> *mut DLManagedTensorVersioned {
    match demo(kind) {
        Ok(m) => m.into_versioned().into_raw(),
        Err(e) => {
            set_error(&e);
            std::ptr::null_mut()
        }
    }
}

/// Calls a versioned `managed`'s deleter (for a capsule that was never consumed).
///
/// # Safety
/// `managed` must be null or a managed tensor the caller owns; it is released.
#[no_mangle]
pub unsafe extern "C" fn rgml_dlpack_free_versioned(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: the caller's contract: a live managed tensor, released once here.
    unsafe {
        if let Some(d) = (*managed).deleter {
            d(managed);
        }
    }
}

/// Calls `managed`'s deleter (for a capsule that was never consumed).
///
/// # Safety
/// `managed` must be null or a managed tensor the caller owns; it is released.
#[no_mangle]
pub unsafe extern "C" fn rgml_dlpack_free(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: the caller's contract: a live managed tensor, released once here.
    unsafe {
        if let Some(d) = (*managed).deleter {
            d(managed);
        }
    }
}

/// Managed tensors rgml exported whose deleter has not run yet ([`dlpack::live_exports`]).
#[no_mangle]
pub extern "C" fn rgml_dlpack_live_exports() -> usize {
    dlpack::live_exports()
}

/// What [`rgml_dlpack_import_check`] reports about an imported tensor.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ImportReport {
    /// rgml's shape (`ne[0]` fastest).
    pub ne: [i64; 4],
    /// rgml's strides in bytes.
    pub nb: [u64; 4],
    /// The view's byte offset in its leaf.
    pub offset: u64,
    /// Address of the first element as rgml reads it (the leaf's bytes plus the offset).
    pub first: usize,
    /// The element type's ggml id.
    pub ggml_type: u32,
}

/// Fills `report` and `values` from the imported `t`.
fn check(ctx: &Context, t: TensorId, report: &mut ImportReport, values: &mut [f64]) -> Result<i64> {
    let layout = ctx.layout(t)?;
    let root = ctx.storage_root(t)?;
    let offs = ctx.tensor(t)?.view_offs();
    *report = ImportReport {
        ne: layout.ne,
        nb: layout.nb.map(|n| n as u64),
        offset: offs as u64,
        first: ctx.leaf_bytes(root).map_or(0, |b| b.as_ptr() as usize + offs),
        ggml_type: layout.dtype.ggml_id(),
    };
    // read through a CPU run (strided reads of the borrowed bytes)
    let g = Graph::build(ctx, &[t])?;
    let got = CpuBackend::new(1)?.run(ctx, &g)?.read_f32(ctx, t)?;
    for (v, g) in values.iter_mut().zip(&got) {
        *v = f64::from(*g);
    }
    Ok(got.len() as i64)
}

/// The import check of both ABIs: `import` takes the tensor into a context.
///
/// # Safety
/// As [`rgml_dlpack_import_check`].
unsafe fn import_check(
    import: impl FnOnce(&mut Context) -> Result<TensorId>,
    report: *mut ImportReport,
    values: *mut f64,
    cap: usize,
) -> i64 {
    let mut r = ImportReport::default();
    let values: &mut [f64] = if values.is_null() || cap == 0 {
        &mut []
    } else {
        // SAFETY: the caller's contract: `cap` writable f64s.
        unsafe { std::slice::from_raw_parts_mut(values, cap) }
    };
    let mut ctx = Context::new();
    let out = match import(&mut ctx) {
        Ok(t) => check(&ctx, t, &mut r, values).unwrap_or_else(|e| {
            set_error(&e);
            -2
        }),
        Err(e) => {
            set_error(&e);
            -1
        }
    };
    drop(ctx);
    if !report.is_null() {
        // SAFETY: the caller's contract: a writable report.
        unsafe { report.write(r) };
    }
    out
}

/// Imports `managed` into a fresh context (taking ownership on success: the
/// deleter runs before this returns, when the context is dropped), fills
/// `report` and writes up to `cap` of its values, read by a CPU run in
/// logical order (rgml's dim 0 fastest: numpy's C order), as f64 into
/// `values`. Returns the number of values; -1 when the import is refused
/// ([`rgml_last_error`]: the caller keeps ownership); -2 when reading it
/// back failed after the import (ownership was taken: the deleter has run).
///
/// # Safety
/// `managed` as for [`dlpack::import`]; `report` null or valid for a write;
/// `values` valid for writes of `cap` f64s (or null with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn rgml_dlpack_import_check(
    managed: *mut DLManagedTensor,
    report: *mut ImportReport,
    values: *mut f64,
    cap: usize,
) -> i64 {
    // SAFETY: the caller's contract is `import`'s and `import_check`'s.
    unsafe { import_check(|ctx| dlpack::import(ctx, managed), report, values, cap) }
}

/// [`rgml_dlpack_import_check`] for a versioned managed tensor.
///
/// # Safety
/// As [`rgml_dlpack_import_check`], `managed` as for [`dlpack::import_versioned`].
#[no_mangle]
pub unsafe extern "C" fn rgml_dlpack_import_check_versioned(
    managed: *mut DLManagedTensorVersioned,
    report: *mut ImportReport,
    values: *mut f64,
    cap: usize,
) -> i64 {
    // SAFETY: the caller's contract is `import_versioned`'s and `import_check`'s.
    unsafe { import_check(|ctx| dlpack::import_versioned(ctx, managed), report, values, cap) }
}

/// Imports with `import` and exports the imported tensor again; `None` (the
/// caller keeps ownership) on error.
fn reexport(import: impl FnOnce(&mut Context) -> Result<TensorId>) -> Option<dlpack::ManagedTensor> {
    let mut ctx = Context::new();
    let t = match import(&mut ctx) {
        Ok(t) => t,
        Err(e) => {
            set_error(&e);
            return None;
        }
    };
    match dlpack::export(&ctx, t) {
        Ok(m) => Some(m),
        Err(e) => {
            // (not expected: an import has a plain type and whole-element
            // strides) the caller keeps ownership, so the context must not
            // run the deleter: it is leaked
            std::mem::forget(ctx);
            set_error(&e);
            None
        }
    }
}

/// Imports `managed` and exports the imported tensor again: a managed tensor
/// over the same bytes with the same shape and strides, holding the imported
/// one (whose deleter runs when this one's does). Null on error
/// ([`rgml_last_error`]), when the caller keeps ownership of `managed`.
///
/// # Safety
/// As [`dlpack::import`].
#[no_mangle]
pub unsafe extern "C" fn rgml_dlpack_reexport(managed: *mut DLManagedTensor) -> *mut DLManagedTensor {
    // SAFETY: the caller's contract is `import`'s.
    reexport(|ctx| unsafe { dlpack::import(ctx, managed) }).map_or(std::ptr::null_mut(), |m| m.into_raw())
}

/// [`rgml_dlpack_reexport`] under the versioned ABI, both ways (the new
/// tensor is flagged read-only).
///
/// # Safety
/// As [`dlpack::import_versioned`].
#[no_mangle]
pub unsafe extern "C" fn rgml_dlpack_reexport_versioned(
    managed: *mut DLManagedTensorVersioned,
) -> *mut DLManagedTensorVersioned {
    // SAFETY: the caller's contract is `import_versioned`'s.
    reexport(|ctx| unsafe { dlpack::import_versioned(ctx, managed) })
        .map_or(std::ptr::null_mut(), |m| m.into_versioned().into_raw())
}
