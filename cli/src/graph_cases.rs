//! Graph cases (JSON Lines, see `docs/GRAPH_CASES.md`): build each case with
//! rgml's public API, run it on a backend, and compare every node's shape,
//! strides, view source, contiguity and values with the case's expectations.

use std::collections::HashMap;
use std::fmt::Write as _;

use rgml::{Backend, BackendStorage, Context, Graph, TensorId};
use serde_json::Value;

/// What one case produced.
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// Mismatches against the expectations (empty: the case passed).
    pub failures: Vec<String>,
    /// The error that stopped building or running the case, if any.
    pub error: Option<String>,
    /// The `--emit` record of the case (one JSON object).
    pub emit: String,
}

impl CaseResult {
    /// True when the case built, ran and matched.
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.failures.is_empty()
    }
}

/// A node as rgml computed it.
struct Got {
    name: String,
    id: TensorId,
    compute: bool,
}

/// The gradient nodes of a case with `"loss"` and `"params"`: (param name, gradient).
type Grads = Vec<(String, TensorId)>;

/// Runs one case (a JSON object) on `backend`. An op the backend does not
/// support fails the case with its error message.
pub fn run_case<B: Backend>(backend: &B, case: &Value) -> CaseResult {
    let id = case["id"].as_str().unwrap_or("?").to_string();
    let mut ctx = Context::new();
    let mut failures = Vec::new();
    let built = build(&mut ctx, case).and_then(|nodes| {
        let grads = gradients(&mut ctx, case, &nodes);
        Ok((nodes, grads?))
    });
    let (nodes, grads, values, error) = match built {
        Err(e) => (Vec::new(), Vec::new(), HashMap::new(), Some(e)),
        Ok((nodes, grads)) => match compute(backend, &ctx, &nodes, &grads) {
            Ok(v) => (nodes, grads, v, None),
            Err(e) => (nodes, grads, HashMap::new(), Some(e)),
        },
    };
    if error.is_none() {
        check(&ctx, case, &nodes, &values, &mut failures);
        check_grads(case, &grads, &values, &mut failures);
    }
    let mut emit = emit(&id, &ctx, &nodes, &values, error.as_deref());
    emit_grads(&mut emit, &grads, &values);
    if let Some(want) = case["expected_error"].as_str() {
        // a case about a refusal passes when rgml refuses it, saying so
        match error {
            Some(e) if e.contains(want) => return CaseResult { id, failures, error: None, emit },
            Some(e) => failures.push(format!("error {e:?}, expected one containing {want:?}")),
            None => failures.push(format!("no error, expected one containing {want:?}")),
        }
        return CaseResult { id, failures, error: None, emit };
    }
    CaseResult { id, failures, error, emit }
}

fn build(ctx: &mut Context, case: &Value) -> Result<Vec<Got>, String> {
    let mut by_name: HashMap<String, TensorId> = HashMap::new();
    let mut out = Vec::new();
    let nodes = case["nodes"].as_array().ok_or("case has no nodes")?;
    for n in nodes {
        let name = n["name"].as_str().ok_or("node without a name")?.to_string();
        let op = n["op"].as_str().ok_or("node without an op")?;
        let src: Vec<TensorId> = n["src"]
            .as_array()
            .ok_or("node without src")?
            .iter()
            .map(|s| s.as_str().and_then(|s| by_name.get(s).copied()).ok_or(format!("{name}: unknown source {s}")))
            .collect::<Result<_, _>>()?;
        let ints = |key: &str| -> Result<Vec<i64>, String> {
            n[key]
                .as_array()
                .ok_or(format!("{name}: no {key}"))?
                .iter()
                .map(|v| v.as_i64().ok_or(format!("{name}: bad {key}")))
                .collect()
        };
        let e = |r: rgml::Result<TensorId>| r.map_err(|e| format!("{name} ({op}): {e}"));
        let first = || src.first().copied().ok_or(format!("{name}: missing source"));
        let id = match op {
            "input" => {
                let ne = ints("ne")?;
                let data: Vec<f32> = n["data"]
                    .as_array()
                    .ok_or(format!("{name}: no data"))?
                    .iter()
                    .map(json_f32)
                    .collect::<Result<_, _>>()?;
                e(ctx.new_f32(&ne, &data))?
            }
            "transpose" => e(ctx.transpose(first()?))?,
            "permute" => {
                let a = ints("axes")?;
                let axes: [usize; 4] = [0, 1, 2, 3].map(|i| a.get(i).copied().unwrap_or(i as i64) as usize);
                e(ctx.permute(first()?, axes))?
            }
            "reshape" => e(ctx.reshape(first()?, &ints("shape")?))?,
            "view" => {
                let ne = ints("view_ne")?;
                let nb: Vec<usize> = ints("view_nb")?.into_iter().map(|x| x as usize).collect();
                let off = n["offset"].as_u64().ok_or(format!("{name}: no offset"))? as usize;
                let a = first()?;
                match (ne.len(), nb.len()) {
                    (1, 0) => e(ctx.view_1d(a, ne[0], off))?,
                    (2, 1) => e(ctx.view_2d(a, ne[0], ne[1], nb[0], off))?,
                    (3, 2) => e(ctx.view_3d(a, [ne[0], ne[1], ne[2]], nb[0], nb[1], off))?,
                    (4, 3) => e(ctx.view_4d(a, [ne[0], ne[1], ne[2], ne[3]], [nb[0], nb[1], nb[2]], off))?,
                    _ => return Err(format!("{name}: view_ne {ne:?} with view_nb {nb:?}")),
                }
            }
            "cont" => e(ctx.cont(first()?))?,
            "add" | "sub" | "mul" | "div" if src.len() == 2 => match op {
                "add" => e(ctx.add(src[0], src[1]))?,
                "sub" => e(ctx.sub(src[0], src[1]))?,
                "mul" => e(ctx.mul(src[0], src[1]))?,
                _ => e(ctx.div(src[0], src[1]))?,
            },
            "scale" => {
                let s = n["s"].as_f64().ok_or(format!("{name}: no s"))? as f32;
                e(ctx.scale(first()?, s))?
            }
            "mul_mat" if src.len() == 2 => e(ctx.mul_mat(src[0], src[1]))?,
            "sum" if src.len() == 1 => e(ctx.sum(src[0]))?,
            "sum_rows" if src.len() == 1 => e(ctx.sum_rows(src[0]))?,
            "soft_max" if src.len() == 1 => e(ctx.soft_max(src[0]))?,
            "add_inplace" | "sub_inplace" | "mul_inplace" | "div_inplace" if src.len() == 2 => {
                let op = match op {
                    "add_inplace" => rgml::BinaryOp::Add,
                    "sub_inplace" => rgml::BinaryOp::Sub,
                    "mul_inplace" => rgml::BinaryOp::Mul,
                    _ => rgml::BinaryOp::Div,
                };
                e(ctx.binary(op, src[0], src[1], true))?
            }
            "scale_inplace" => {
                let s = n["s"].as_f64().ok_or(format!("{name}: no s"))? as f32;
                e(ctx.scale_inplace(first()?, s))?
            }
            unary if src.len() == 1 && unary_op(unary).is_some() => {
                let (f, inplace) = unary_op(unary).ok_or("unreachable")?;
                e(ctx.unary(f, src[0], inplace))?
            }
            "mean" if src.len() == 1 => e(ctx.mean(src[0]))?,
            "argmax" if src.len() == 1 => e(ctx.argmax(src[0]))?,
            "cross_entropy_loss" if src.len() == 2 => e(ctx.cross_entropy_loss(src[0], src[1]))?,
            other => return Err(format!("{name}: unknown op {other} with {} sources", src.len())),
        };
        ctx.set_name(id, &name).map_err(|e| e.to_string())?;
        by_name.insert(name.clone(), id);
        // the registry says which nodes compute (views and leaves do not)
        let compute = ctx.tensor(id).map_err(|e| e.to_string())?.op().is_compute();
        out.push(Got { name, id, compute });
    }
    Ok(out)
}

/// A unary op's name (`relu`, `exp_inplace`, …): the op and whether in place.
fn unary_op(name: &str) -> Option<(rgml::UnaryOp, bool)> {
    let (base, inplace) = name.strip_suffix("_inplace").map_or((name, false), |b| (b, true));
    rgml::UnaryOp::ALL.into_iter().find(|u| u.name() == base).map(|u| (u, inplace))
}

/// The backward graph of a case with `"loss": name` and `"params": [names]`
/// (none without them); an in-place hazard or an op without a gradient is
/// the case's error.
fn gradients(ctx: &mut Context, case: &Value, nodes: &[Got]) -> Result<Grads, String> {
    let Some(loss) = case["loss"].as_str() else { return Ok(Vec::new()) };
    let find = |name: &str| nodes.iter().find(|g| g.name == name).map(|g| g.id).ok_or(format!("unknown node {name}"));
    let loss = find(loss)?;
    let names: Vec<String> = case["params"]
        .as_array()
        .ok_or("a case with a loss needs \"params\"")?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or("params are node names"))
        .collect::<Result<_, _>>()?;
    let params = names.iter().map(|n| find(n)).collect::<Result<Vec<_>, _>>()?;
    let grads = ctx.backward(loss, &params).map_err(|e| e.to_string())?;
    names
        .into_iter()
        .zip(params)
        .map(|(n, p)| grads.get(p).map(|g| (n.clone(), g)).ok_or(format!("the loss does not depend on {n}")))
        .collect()
}

fn compute<B: Backend>(
    backend: &B,
    ctx: &Context,
    nodes: &[Got],
    grads: &Grads,
) -> Result<HashMap<String, Vec<f32>>, String> {
    let mut graph = Graph::new(ctx);
    for id in nodes.iter().filter(|g| g.compute).map(|g| g.id).chain(grads.iter().map(|g| g.1)) {
        graph.build_forward_expand(ctx, id).map_err(|e| e.to_string())?;
    }
    let storage = backend.run(ctx, &graph).map_err(|e| e.to_string())?;
    let mut values = HashMap::new();
    for g in nodes.iter().filter(|g| g.compute) {
        values.insert(g.name.clone(), storage.read_f32(ctx, g.id).map_err(|e| format!("{}: {e}", g.name))?);
    }
    for (name, g) in grads {
        values.insert(grad_key(name), storage.read_f32(ctx, *g).map_err(|e| format!("grad of {name}: {e}"))?);
    }
    Ok(values)
}

/// Where a parameter's gradient is kept among the computed values.
fn grad_key(param: &str) -> String {
    format!("\u{0}grad:{param}")
}

/// `"expected_grads": {param: [values]}` against the gradients, at the case's tolerance.
fn check_grads(case: &Value, grads: &Grads, values: &HashMap<String, Vec<f32>>, failures: &mut Vec<String>) {
    let Some(want) = case["expected_grads"].as_object() else { return };
    let (atol, rtol) = (case["atol"].as_f64().unwrap_or(0.0), case["rtol"].as_f64().unwrap_or(0.0));
    for (name, exp) in want {
        let (Some(exp), Some(got)) =
            (exp.as_array(), grads.iter().find(|g| &g.0 == name).and_then(|_| values.get(&grad_key(name))))
        else {
            failures.push(format!("no gradient of {name}"));
            continue;
        };
        if exp.len() != got.len() {
            failures.push(format!("grad of {name}: {} values, expected {}", got.len(), exp.len()));
            continue;
        }
        for (i, (e, &v)) in exp.iter().zip(got).enumerate() {
            let e = json_f32(e).unwrap_or(f32::NAN);
            let within = ((v - e).abs() as f64) <= atol + rtol * (e.abs() as f64);
            if !within {
                failures.push(format!("grad of {name}[{i}]: got {v:?}, expected {e:?}"));
                break;
            }
        }
    }
}

/// Adds `"grads": {param: [values]}` to an emitted record.
fn emit_grads(emit: &mut String, grads: &Grads, values: &HashMap<String, Vec<f32>>) {
    if grads.is_empty() || !emit.ends_with('}') {
        return;
    }
    emit.pop();
    emit.push_str(",\"grads\":{");
    let parts: Vec<String> = grads
        .iter()
        .filter_map(|(name, _)| {
            let v = values.get(&grad_key(name))?;
            Some(format!(
                "{}:[{}]",
                Value::from(name.as_str()),
                v.iter().map(|&x| fmt_f32(x)).collect::<Vec<_>>().join(",")
            ))
        })
        .collect();
    emit.push_str(&parts.join(","));
    emit.push_str("}}");
}

fn check(ctx: &Context, case: &Value, nodes: &[Got], values: &HashMap<String, Vec<f32>>, failures: &mut Vec<String>) {
    let exact = case["exact"].as_bool().unwrap_or(false);
    let atol = case["atol"].as_f64().unwrap_or(0.0);
    let rtol = case["rtol"].as_f64().unwrap_or(0.0);
    let Some(spec) = case["nodes"].as_array() else { return };
    for (n, g) in spec.iter().zip(nodes) {
        let Ok(t) = ctx.tensor(g.id) else { continue };
        let l = t.layout();
        let ne: Vec<i64> = l.ne.to_vec();
        let nb: Vec<u64> = l.nb.iter().map(|&x| x as u64).collect();
        // a key the case leaves out is not checked (gradient cases give ops and gradients only)
        let has = |k: &str| n.get(k).is_some();
        if has("ne")
            && n["ne"].as_array().map(|a| a.iter().map(|v| v.as_i64()).collect::<Vec<_>>())
                != Some(ne.iter().map(|&x| Some(x)).collect())
        {
            failures.push(format!("{}: ne {:?}, expected {}", g.name, ne, n["ne"]));
        }
        if has("nb")
            && n["nb"].as_array().map(|a| a.iter().map(|v| v.as_u64()).collect::<Vec<_>>())
                != Some(nb.iter().map(|&x| Some(x)).collect())
        {
            failures.push(format!("{}: nb {:?}, expected {}", g.name, nb, n["nb"]));
        }
        let view_of = t.view_src().map(|r| ctx.label(r));
        if has("view_of") && n["view_of"].as_str().map(str::to_string) != view_of {
            failures.push(format!("{}: view_of {:?}, expected {}", g.name, view_of, n["view_of"]));
        }
        if has("view_offs") && n["view_offs"].as_u64() != Some(t.view_offs() as u64) {
            failures.push(format!("{}: view_offs {}, expected {}", g.name, t.view_offs(), n["view_offs"]));
        }
        if has("contiguous") && n["contiguous"].as_bool() != Some(l.is_contiguous()) {
            failures.push(format!("{}: contiguous {}, expected {}", g.name, l.is_contiguous(), n["contiguous"]));
        }
        if let (Some(exp), Some(got)) = (n["expected"].as_array(), values.get(&g.name)) {
            if exp.len() != got.len() {
                failures.push(format!("{}: {} values, expected {}", g.name, got.len(), exp.len()));
                continue;
            }
            for (i, (e, &v)) in exp.iter().zip(got).enumerate() {
                let Ok(e) = json_f32(e) else {
                    failures.push(format!("{}: bad expected value {e}", g.name));
                    break;
                };
                let ok = if e.is_nan() || v.is_nan() {
                    e.is_nan() && v.is_nan()
                } else if exact {
                    e.to_bits() == v.to_bits() || (e == 0.0 && v == 0.0)
                } else {
                    ((v - e).abs() as f64) <= atol + rtol * (e.abs() as f64)
                };
                if !ok {
                    failures.push(format!("{}[{i}]: got {v:?}, expected {e:?}", g.name));
                    break;
                }
            }
        }
    }
}

/// A JSON number (or `NaN`/`Infinity` string) as f32.
fn json_f32(v: &Value) -> Result<f32, String> {
    match v {
        Value::Number(n) => n.as_f64().map(|x| x as f32).ok_or(format!("bad number {n}")),
        Value::String(s) => s.parse::<f32>().map_err(|_| format!("bad number {s}")),
        Value::Null => Ok(f32::NAN),
        other => Err(format!("bad number {other}")),
    }
}

/// Shortest round-trip text of `v`, with `NaN`, `Infinity`, `-Infinity` bare.
pub fn fmt_f32(v: f32) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{v:?}")
    }
}

fn emit(id: &str, ctx: &Context, nodes: &[Got], values: &HashMap<String, Vec<f32>>, error: Option<&str>) -> String {
    let mut s =
        format!("{{\"id\":{},\"error\":{},\"nodes\":{{", Value::from(id), error.map_or(Value::Null, Value::from));
    for (i, g) in nodes.iter().enumerate() {
        let Ok(t) = ctx.tensor(g.id) else { continue };
        let l = t.layout();
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{}:{{\"ne\":{:?},\"nb\":{:?},\"view_offs\":{},\"contiguous\":{}",
            Value::from(g.name.as_str()),
            l.ne,
            l.nb,
            t.view_offs(),
            l.is_contiguous()
        );
        if let Some(v) = values.get(&g.name) {
            s.push_str(",\"values\":[");
            s.push_str(&v.iter().map(|&x| fmt_f32(x)).collect::<Vec<_>>().join(","));
            s.push(']');
        }
        s.push('}');
    }
    s.push_str("}}");
    s
}
