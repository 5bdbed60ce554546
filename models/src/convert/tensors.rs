//! The checkpoint's tensors under GGUF's llama names: every one expected found and its
//! shape checked against the config, q/k rows permuted for ggml's rope, and the bytes
//! converted to the output type row by row as the file is written.

use std::io::{self, Read};
use std::path::Path;

use rgml::safetensors::{SafetensorsFile, SafetensorsIndex, SafetensorsTensor};
use rgml::{bf16, f16, quant, DType};

use super::common::{bad, OutType};
use super::config::LlamaConfig;

/// Where the tensors are: one file, or the shards of an index.
pub enum Source {
    /// A single `.safetensors` file.
    File(SafetensorsFile),
    /// A sharded checkpoint's `model.safetensors.index.json` and its shards.
    Index(SafetensorsIndex),
}

impl Source {
    /// Opens `path`: an index when its name ends in `.json`, else a safetensors file.
    ///
    /// # Errors
    /// As [`SafetensorsFile::open`] and [`SafetensorsIndex::open`].
    pub fn open(path: &Path) -> rgml::Result<Source> {
        if path.extension().is_some_and(|e| e == "json") {
            Ok(Source::Index(SafetensorsIndex::open(path)?))
        } else {
            Ok(Source::File(SafetensorsFile::open(path)?))
        }
    }

    /// The safetensors files read.
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            Source::File(f) => vec![f.path()],
            Source::Index(i) => i.shards().iter().map(SafetensorsFile::path).collect(),
        }
    }

    /// The tensor `name`, with the file holding it.
    fn get(&self, name: &str) -> Option<(&SafetensorsFile, &SafetensorsTensor)> {
        let f = match self {
            Source::File(f) => f,
            Source::Index(i) => i.shard_of(name)?,
        };
        Some((f, f.header().tensor(name)?))
    }

    /// Every tensor name, and those of tensors rgml cannot read (with why).
    fn names(&self) -> (Vec<String>, Vec<(String, String)>) {
        let files: Vec<&SafetensorsFile> = match self {
            Source::File(f) => vec![f],
            Source::Index(i) => i.shards().iter().collect(),
        };
        let names = files.iter().flat_map(|f| f.header().names().map(str::to_string)).collect();
        let skipped =
            files.iter().flat_map(|f| f.header().skipped().iter().map(|s| (s.name.clone(), s.why.clone()))).collect();
        (names, skipped)
    }
}

/// One output tensor: its GGUF name, its source, the rows to permute, the types.
pub struct Planned<'a> {
    /// GGUF name.
    pub name: String,
    /// The source tensor's bytes (row-major, the file's type).
    pub bytes: &'a [u8],
    /// The source tensor's type.
    pub from: DType,
    /// The output type.
    pub to: DType,
    /// ggml shape (innermost first).
    pub ne: Vec<i64>,
    /// For q/k: the heads whose rows are re-ordered.
    pub permute_heads: Option<usize>,
}

/// The llama tensors of `cfg` (with `n_vocab` token rows) found in `src`, in a fixed order
/// (so a sharded checkpoint converts to the same bytes as one file), each typed per `out`.
///
/// # Errors
/// [`rgml::Error::Invalid`] (naming `input`) for a missing tensor, a shape that disagrees
/// with the config, a tensor this converter does not know (llama.cpp refuses to map those too),
/// one of a type other than F32, F16 or BF16, and a tensor rgml cannot read.
pub fn plan<'a>(
    input: &Path,
    src: &'a Source,
    cfg: &LlamaConfig,
    n_vocab: usize,
    out: OutType,
) -> rgml::Result<Vec<Planned<'a>>> {
    let (d, hd) = (cfg.n_embd as u64, cfg.head_dim() as u64);
    let (q_rows, kv_rows, ff) = (cfg.n_head as u64 * hd, cfg.n_head_kv as u64 * hd, cfg.n_ff as u64);
    let nv = n_vocab as u64;
    // (HF name, GGUF name, row-major shape, heads of q/k)
    let mut want: Vec<(String, String, Vec<u64>, Option<usize>)> = Vec::new();
    want.push(("model.embed_tokens.weight".into(), "token_embd.weight".into(), vec![nv, d], None));
    // a tied checkpoint that still stores lm_head keeps it, as llama.cpp's converter does
    if src.get("lm_head.weight").is_some() || !cfg.tied {
        want.push(("lm_head.weight".into(), "output.weight".into(), vec![nv, d], None));
    }
    want.push(("model.norm.weight".into(), "output_norm.weight".into(), vec![d], None));
    for i in 0..cfg.n_layer {
        let (h, g) = (format!("model.layers.{i}."), format!("blk.{i}."));
        let mut t = |hf: &str, gg: &str, shape: &[u64], heads: Option<usize>| {
            want.push((format!("{h}{hf}"), format!("{g}{gg}"), shape.to_vec(), heads));
        };
        t("input_layernorm.weight", "attn_norm.weight", &[d], None);
        t("self_attn.q_proj.weight", "attn_q.weight", &[q_rows, d], Some(cfg.n_head));
        t("self_attn.k_proj.weight", "attn_k.weight", &[kv_rows, d], Some(cfg.n_head_kv));
        t("self_attn.v_proj.weight", "attn_v.weight", &[kv_rows, d], None);
        t("self_attn.o_proj.weight", "attn_output.weight", &[d, q_rows], None);
        t("post_attention_layernorm.weight", "ffn_norm.weight", &[d], None);
        t("mlp.gate_proj.weight", "ffn_gate.weight", &[ff, d], None);
        t("mlp.up_proj.weight", "ffn_up.weight", &[ff, d], None);
        t("mlp.down_proj.weight", "ffn_down.weight", &[d, ff], None);
    }
    let e = |msg: String| bad(input, &msg);
    let (names, skipped) = src.names();
    if let Some((n, why)) = skipped.first() {
        return Err(e(format!("tensor {n:?} cannot be read: {why}")));
    }
    for n in &names {
        // rotary tables some checkpoints carry are recomputed, as llama.cpp's converter does
        if !n.ends_with(".rotary_emb.inv_freq") && !want.iter().any(|w| w.0 == *n) {
            return Err(e(format!("tensor {n:?} is not one of a {} checkpoint's", cfg.architecture)));
        }
    }
    let mut planned = Vec::with_capacity(want.len());
    for (hf, gg, shape, heads) in want {
        let Some((file, t)) = src.get(&hf) else {
            return Err(e(format!("tensor {hf:?} (for {gg}) is missing")));
        };
        if t.shape != shape {
            return Err(e(format!("tensor {hf:?} has shape {:?}, the config says {shape:?}", t.shape)));
        }
        if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(e(format!("tensor {hf:?} is {}; rgml convert reads F32, F16 and BF16", t.dtype)));
        }
        let ne: Vec<i64> = t.shape.iter().rev().map(|&n| n as i64).collect();
        let to = out_type(t.dtype, out, &ne);
        planned.push(Planned { name: gg, bytes: file.tensor_bytes(t), from: t.dtype, to, ne, permute_heads: heads });
    }
    Ok(planned)
}

/// The output type of a tensor of type `from` and ggml shape `ne`: vectors (the norms) F32,
/// matrices `out` (kept as stored by default; Q8_0 falls back to F16 for rows that are not
/// whole blocks, as llama.cpp's converter does).
fn out_type(from: DType, out: OutType, ne: &[i64]) -> DType {
    if ne.len() < 2 {
        return DType::F32;
    }
    match out {
        OutType::Keep => from,
        OutType::F32 => DType::F32,
        OutType::F16 => DType::F16,
        OutType::BF16 => DType::BF16,
        OutType::Q8_0 if ne[0] % DType::Q8_0.block_size() as i64 == 0 => DType::Q8_0,
        OutType::Q8_0 => DType::F16,
    }
}

/// The source row that output row `r` of a q/k matrix of `rows` rows and `heads` heads takes.
///
/// Hugging Face's rope rotates the two halves of a head (`rotate_half`), ggml's adjacent
/// pairs; llama.cpp's converter re-orders each head's rows so that half-rows `i` and
/// `i + hd/2` become rows `2i` and `2i + 1`.
pub fn permuted_row(r: usize, rows: usize, heads: usize) -> usize {
    let hd = rows / heads;
    let (h, within) = (r / hd, r % hd);
    let (i, j) = (within / 2, within % 2);
    h * hd + j * (hd / 2) + i
}

/// Streams a planned tensor's bytes in the output type, a row at a time.
pub struct RowReader<'a> {
    t: Planned<'a>,
    rows: usize,
    next_row: usize,
    buf: Vec<u8>,
    pos: usize,
    values: Vec<f32>,
}

impl<'a> RowReader<'a> {
    /// A reader of `t`'s output bytes.
    pub fn new(t: Planned<'a>) -> RowReader<'a> {
        let ne0 = t.ne[0].max(1) as usize;
        let rows = t.bytes.len() / row_bytes(t.from, ne0).max(1);
        RowReader { t, rows, next_row: 0, buf: Vec::new(), pos: 0, values: vec![0.0; ne0] }
    }

    /// Converts the next row into `buf`.
    fn fill(&mut self) -> io::Result<()> {
        let ne0 = self.values.len();
        let in_row = row_bytes(self.t.from, ne0);
        let src_row = match self.t.permute_heads {
            Some(h) => permuted_row(self.next_row, self.rows, h),
            None => self.next_row,
        };
        let src = &self.t.bytes[src_row * in_row..(src_row + 1) * in_row];
        self.next_row += 1;
        self.pos = 0;
        self.buf.clear();
        if self.t.from == self.t.to {
            self.buf.extend_from_slice(src);
            return Ok(());
        }
        for (v, b) in self.values.iter_mut().zip(src.chunks_exact(row_bytes(self.t.from, 1))) {
            *v = match self.t.from {
                DType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f32(),
                DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f32(),
                _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            };
        }
        match self.t.to {
            DType::F32 => self.buf.extend(self.values.iter().flat_map(|v| v.to_le_bytes())),
            DType::F16 => self.buf.extend(self.values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes())),
            DType::BF16 => self.buf.extend(self.values.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes())),
            to => {
                self.buf.resize(row_bytes(to, ne0), 0);
                quant::quantize_chunk(to, &self.values, &mut self.buf).map_err(io::Error::other)?;
            }
        }
        Ok(())
    }
}

impl Read for RowReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            if self.next_row == self.rows {
                return Ok(0);
            }
            self.fill()?;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Bytes of a row of `n` values of `dt` (0 for a length that is not whole blocks).
fn row_bytes(dt: DType, n: usize) -> usize {
    dt.row_size(n as i64).unwrap_or(0)
}

impl Source {
    /// The row count of the tensor `name`, if present (the vocabulary size of the embedding).
    pub fn rows(&self, name: &str) -> Option<u64> {
        self.get(name).and_then(|(_, t)| t.shape.first().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(bytes: &[u8], from: DType, to: DType, ne: [i64; 2], heads: Option<usize>) -> Planned<'_> {
        Planned { name: "t".into(), bytes, from, to, ne: ne.to_vec(), permute_heads: heads }
    }

    fn read_all(t: Planned) -> Vec<u8> {
        let mut out = Vec::new();
        RowReader::new(t).read_to_end(&mut out).unwrap();
        out
    }

    /// BF16 rows widen exactly to F32, re-ordered as q/k rows are (one head of 4 rows).
    #[test]
    fn rows_are_permuted_and_widened() {
        let vals: Vec<f32> = (0..8).map(|i| i as f32 * 0.5 - 1.0).collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()).collect();
        let out = read_all(planned(&bytes, DType::BF16, DType::F32, [2, 4], Some(1)));
        let got: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        // rows 0, 2, 1, 3 of the source
        let want: Vec<f32> = [0, 2, 1, 3].iter().flat_map(|&r| [vals[2 * r], vals[2 * r + 1]]).collect();
        assert_eq!(got, want);
    }

    /// F32 to F16 rounds to nearest even; to Q8_0 gives the quantizer's bytes.
    #[test]
    fn rows_are_narrowed() {
        let vals: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) / 7.0).collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = read_all(planned(&bytes, DType::F32, DType::F16, [32, 2], None));
        let want: Vec<u8> = vals.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect();
        assert_eq!(out, want);
        let out = read_all(planned(&bytes, DType::F32, DType::Q8_0, [32, 2], None));
        let mut want = vec![0u8; 2 * row_bytes(DType::Q8_0, 32)];
        quant::quantize_chunk(DType::Q8_0, &vals, &mut want).unwrap();
        assert_eq!(out, want);
    }
}
