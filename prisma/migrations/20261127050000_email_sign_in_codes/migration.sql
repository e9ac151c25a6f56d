-- E-mail sign-in codes (POST /v1/auth/email/request and /verify).
CREATE TABLE "email_sign_in_codes" (
    "id" UUID NOT NULL,
    "email" TEXT NOT NULL,
    "code_hash" TEXT NOT NULL,
    "redirect_uri" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "consumed_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "email_sign_in_codes_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "email_sign_in_codes_email_created_at_idx" ON "email_sign_in_codes"("email", "created_at" DESC);
