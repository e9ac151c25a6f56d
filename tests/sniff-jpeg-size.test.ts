import { describe, expect, it } from "vitest";
import { imageSize } from "@/lib/uploads/sniff-file-type.ts";

/** A JPEG's start: SOI, then `segments`, then a baseline SOF0 of 640 × 480. */
function jpeg(...segments: number[][]): Buffer {
  const sof = [0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0xe0, 0x02, 0x80, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01];
  return Buffer.from([0xff, 0xd8, ...segments.flat(), ...sof, 0xff, 0xd9]);
}

describe("a JPEG's size is read past fill bytes and markers without a length", () => {
  it("reads a plain header", () => {
    expect(imageSize(jpeg([0xff, 0xe0, 0x00, 0x04, 0x4a, 0x46]), "image/jpeg")).toEqual({ width: 640, height: 480 });
  });

  it("skips 0xFF fill bytes before a marker (allowed by T.81 B.1.1.2)", () => {
    // A fill byte was read as the marker 0xFF and its next two bytes as a length: the size was lost or wrong.
    expect(imageSize(jpeg([0xff, 0xff, 0xff, 0xe0, 0x00, 0x04, 0x4a, 0x46], [0xff, 0xff]), "image/jpeg")).toEqual({ width: 640, height: 480 });
  });

  it("steps over markers that have no length field (TEM, RSTn, a repeated SOI)", () => {
    expect(imageSize(jpeg([0xff, 0x01], [0xff, 0xd0], [0xff, 0xd8], [0xff, 0xe1, 0x00, 0x02]), "image/jpeg")).toEqual({ width: 640, height: 480 });
  });

  it("stops at the end of the image without a frame", () => {
    expect(imageSize(Buffer.from([0xff, 0xd8, 0xff, 0xd9, 0xff, 0xc0, 0, 0x11, 8, 0, 1, 0, 1, 3, 0, 0, 0]), "image/jpeg")).toBeNull();
  });
});
