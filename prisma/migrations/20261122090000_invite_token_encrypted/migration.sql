-- AlterTable
ALTER TABLE "invites" ADD COLUMN     "token_encrypted" TEXT;
