/**
 * A vector as a statement parameter in pgvector's binary format (`vector_recv`): int16 dimensions,
 * int16 zero, then each element as a big-endian float4. Both drivers send bytes in the binary format
 * (node-postgres for a Buffer, PGlite's pipeline for bytes of a type without a serializer), so the
 * database reads the 384 floats instead of parsing 384 decimal numbers: ~1.2 ms saved per recall on
 * the embedded database, where WASM's float parsing is slow. The same float4 values as the text form:
 * both round each number to the nearest float4.
 */
export function vectorParameter(vector: ArrayLike<number>): Buffer {
  const bytes = Buffer.allocUnsafe(4 + 4 * vector.length);
  bytes.writeInt16BE(vector.length, 0);
  bytes.writeInt16BE(0, 2);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatBE(vector[i]!, 4 + 4 * i);
  return bytes;
}
