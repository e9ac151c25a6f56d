// Types of lib/extraction/check-unpacked-size.mjs (plain ESM, loaded by the extraction worker).
/** What a DOCX may unpack to. */
export const MAX_UNPACKED_BYTES: number;

/** Why a zip archive must not be unpacked, or null when it may be. */
export function unpackedSizeProblem(bytes: Buffer, limit?: number): string | null;
