import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { OwnershipTransfer } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import { transferState } from "./serialize-hub.ts";

/** A transfer of this hub (the caller's membership is checked before). */
export async function transferOrThrow(db: DbClient, hubId: string, transferId: string): Promise<OwnershipTransfer> {
  const transfer = isUuid(transferId) ? await db.ownershipTransfer.findFirst({ where: { id: transferId, hubId } }) : null;
  if (!transfer) throw new ApiError("not_found", "Ownership transfer not found");
  return transfer;
}

/**
 * Only a pending, unexpired transfer can be accepted or canceled:
 * accepted → 409 conflict, canceled → 410 canceled, expired → 410 expired.
 */
export function assertTransferPending(transfer: OwnershipTransfer, now: Date): void {
  const state = transferState(transfer, now);
  if (state === "accepted") throw new ApiError("conflict", "This ownership transfer was already accepted", { state });
  if (state === "canceled") throw new ApiError("canceled", "This ownership transfer was canceled", { state });
  if (state === "expired") throw new ApiError("expired", "This ownership transfer has expired; the owner can start a new one", { state });
}
