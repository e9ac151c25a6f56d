// Types of lib/extraction/check-unpacked-size.mjs (plain ESM, loaded by the extraction worker).
/** What a DOCX may unpack to. */
export const MAX_UNPACKED_BYTES: number;

/** How deep a DOCX's XML elements may nest. */
export const MAX_XML_DEPTH: number;

/** Why a DOCX nested deeper than MAX_XML_DEPTH was not read. */
export const NESTED_TOO_DEEPLY: string;

/** Why a zip archive must not be unpacked (too large, or an XML part nested too deep), or null when it may be. */
export function unpackedSizeProblem(bytes: Buffer, limit?: number): string | null;

/** Whether the elements of an XML part (as the parser reads it, UTF-8; and as UTF-16 when it is that) nest deeper than `max`. */
export function xmlDepthExceeds(xml: Buffer, max: number): boolean;
