import { z } from "zod";

/**
 * A file's name as an upload's intent and a create's file_ref give it. The create's may rename the
 * file, and it is the name every download saves under (Content-Disposition, the CLI): checked there
 * only, "../../.bashrc" or a blank name got in through the file_ref.
 */
export const uploadFilenameSchema = z
  .string()
  .trim()
  .min(1, "filename must not be empty")
  .max(255)
  .refine((name) => !/[\0/\\]/.test(name), "filename must not contain slashes or NUL")
  .meta({ pattern: "^[^/\\\\\\u0000]+$" });
