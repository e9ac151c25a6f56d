// Plain ESM: the extraction worker (extract-worker.mjs) loads it directly, outside the Next bundle.
import { getHeapStatistics } from "node:v8";

const { ArrayBuffer: PlainArrayBuffer, SharedArrayBuffer: PlainSharedArrayBuffer } = globalThis;

/** Smaller requests go through unchecked: a decoded stream that keeps growing soon asks for more. */
const CHECKED_FROM = 1024 * 1024;

const CONSTRUCTORS = [
  "ArrayBuffer",
  "SharedArrayBuffer",
  "Uint8Array",
  "Uint8ClampedArray",
  "Int8Array",
  "Uint16Array",
  "Int16Array",
  "Uint32Array",
  "Int32Array",
  "Float32Array",
  "Float64Array",
  "BigInt64Array",
  "BigUint64Array",
];

/**
 * Bounds the array buffers this thread's code allocates. A worker's resourceLimits cover only the
 * JavaScript heap; buffers live outside it, and the PDF parser decodes a compressed stream into
 * one Uint8Array that doubles as it grows, so a few hundred KiB of deflated zeros would fill
 * gigabytes of the server's memory inside the time limit. Every typed array and ArrayBuffer built
 * through the globals (the parsers' code) is refused once it would take the thread's buffers past
 * the limit; the parser may swallow that throw, so `tripped` says afterwards whether it happened.
 */
export function installBufferGuard() {
  const state = { limitBytes: Infinity, tripped: false };
  for (const name of CONSTRUCTORS) {
    const original = globalThis[name];
    if (typeof original !== "function") continue;
    const perElement = original.BYTES_PER_ELEMENT ?? 1;
    globalThis[name] = new Proxy(original, {
      construct(target, args, newTarget) {
        const bytes = requestedBytes(args[0], perElement);
        if (bytes >= CHECKED_FROM && getHeapStatistics().external_memory + bytes > state.limitBytes) {
          state.tripped = true;
          throw new RangeError(`Array buffer allocation of ${bytes} bytes is over the reader's memory limit`);
        }
        return Reflect.construct(target, args, newTarget);
      },
    });
  }
  return {
    /** Starts a task: its buffers may come to `limitBytes` in all. */
    reset(limitBytes) {
      state.limitBytes = limitBytes;
      state.tripped = false;
    },
    /** Was an allocation refused since the last reset? */
    get tripped() {
      return state.tripped;
    },
  };
}

/** New memory a constructor call asks for: a length, or a copy of an array-like; a view of an existing buffer asks for none. */
function requestedBytes(first, perElement) {
  if (typeof first === "number") return first * perElement;
  if (first === null || typeof first !== "object" || first instanceof PlainArrayBuffer || (PlainSharedArrayBuffer !== undefined && first instanceof PlainSharedArrayBuffer)) return 0;
  return typeof first.length === "number" ? first.length * perElement : 0;
}
