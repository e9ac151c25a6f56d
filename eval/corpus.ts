/**
 * The recall eval corpus: a small engineering organisation's memories across
 * several hubs, and graded questions about them. Written to look like what
 * agents and people actually push, not to suit the ranker.
 *
 * Grades: 3 = the answer, 2 = directly useful, 1 = related background.
 * `harmful`: memories that must never be returned for that query (a near
 * miss that would mislead, an archived memory, another tenant's memory).
 */

export type HubKey = "ann" | "platform" | "payments" | "mobile" | "bob_private" | "support";
export type UserKey = "ann" | "mira" | "kenji" | "bob" | "lucia";

export interface EvalMemory {
  key: string;
  hub: HubKey;
  author: UserKey;
  daysAgo: number;
  content: string;
  title?: string;
  kind?: "episodic" | "semantic" | "procedural" | "rationale";
  archived?: boolean;
  project_context?: { repo?: string; project?: string; branch?: string };
}

export interface EvalQuery {
  id: string;
  category: "paraphrase" | "identifier" | "multilingual" | "temporal" | "author" | "negative" | "keyword" | "filter";
  query: string | ((now: Date) => string);
  relevant: Record<string, number>;
  harmful?: string[];
  hub_ids?: HubKey[];
  kind?: EvalMemory["kind"];
  /** Expected derived filters (checked, not scored). */
  expect?: { author?: UserKey; timeBounded?: boolean };
}

/** Who can read which hub. Ann runs every query; she is not a member of bob_private. */
export const HUB_MEMBERS: Record<HubKey, UserKey[]> = {
  ann: ["ann"],
  platform: ["ann", "mira", "kenji"],
  payments: ["ann", "mira", "lucia"],
  mobile: ["ann", "kenji"],
  support: ["ann", "lucia", "bob"],
  bob_private: ["bob"],
};

export const USER_NAMES: Record<UserKey, string> = {
  ann: "Ann Keller",
  mira: "Mira Okafor",
  kenji: "Kenji Watanabe",
  bob: "Bob Lindqvist",
  lucia: "Lucia Ferreira",
};

export const MEMORIES: EvalMemory[] = [
  // ── platform: deploys, infra, incidents ────────────────────────────────
  {
    key: "deploy-runbook",
    hub: "platform",
    author: "mira",
    daysAgo: 40,
    kind: "procedural",
    project_context: { repo: "acme/api", project: "api" },
    content: `# Production deploy runbook

## Before you start
Make sure the release branch is green in CI and that nobody is running a data backfill.

## Steps
1. Run database migrations first: \`npm run db:migrate\` against the production DATABASE_URL.
2. Roll the api pods: \`kubectl rollout restart deployment/api -n prod\`.
3. Watch the rollout with \`kubectl rollout status deployment/api -n prod\` until all replicas are ready.
4. Post the release notes in #releases.

## Rollback
If error rates climb, \`kubectl rollout undo deployment/api -n prod\` returns to the previous ReplicaSet. Migrations are forward-only, so never roll back the schema.`,
  },
  {
    key: "pg-pool",
    hub: "platform",
    author: "kenji",
    daysAgo: 25,
    kind: "semantic",
    content: `# Postgres connection pool sizing

The api uses PgBouncer in transaction mode in front of Postgres 16. Each api pod opens at most 10 server connections (ENGRAM_DB_POOL_SIZE=10); with 12 pods that is 120, below max_connections=200 with headroom for migrations and psql sessions. Raising the pool size per pod did not improve throughput in load tests; the bottleneck was lock contention on the jobs table.`,
  },
  {
    key: "redis-pool",
    hub: "platform",
    author: "kenji",
    daysAgo: 24,
    kind: "semantic",
    content: `# Redis client settings

The session cache uses ioredis with maxRetriesPerRequest=3 and enableOfflineQueue=false so requests fail fast when Redis is down. Keys expire after 30 minutes; the eviction policy is allkeys-lru with a 2 GB maxmemory.`,
  },
  {
    key: "econnreset-incident",
    hub: "platform",
    author: "mira",
    daysAgo: 12,
    kind: "episodic",
    content: `# Incident: ECONNRESET from the billing webhook consumer

Between 09:10 and 09:55 UTC the webhook consumer logged thousands of \`Error: read ECONNRESET\` while calling the ledger service. Cause: the ledger's load balancer closes idle keep-alive connections after 60 s, while our agent kept sockets for 120 s. Fix: set keepAliveMsecs to 30 s and freeSocketTimeout to 50 s in http-agent.ts, and retry idempotent calls once on ECONNRESET.`,
  },
  {
    key: "oom-incident",
    hub: "platform",
    author: "kenji",
    daysAgo: 60,
    kind: "episodic",
    content: `# Incident: search workers OOMKilled

The search-indexer pods were OOMKilled every few hours. A heap snapshot showed the embedding batch buffered all documents of a tenant before writing. We now stream in batches of 64 and the memory limit went from 4Gi back to 1.5Gi.`,
  },
  {
    key: "why-pgbouncer",
    hub: "platform",
    author: "ann",
    daysAgo: 90,
    kind: "rationale",
    content: `# Why we put PgBouncer in front of Postgres

We chose PgBouncer over raising max_connections because every Postgres backend costs ~10 MB and connection storms during deploys exhausted memory. Transaction pooling lets 12 pods share 120 server connections. We accepted losing session-level features (advisory locks held across transactions, SET without LOCAL) as the trade-off.`,
  },
  {
    key: "terraform-state",
    hub: "platform",
    author: "mira",
    daysAgo: 70,
    kind: "procedural",
    content: `# Terraform state

Remote state lives in the S3 bucket acme-tf-state (eu-west-1) with DynamoDB table tf-locks for locking. If a plan hangs with "Error acquiring the state lock", check the lock table and run \`terraform force-unlock <LOCK_ID>\` only after confirming nobody else is applying.`,
  },
  {
    key: "ci-cache",
    hub: "platform",
    author: "kenji",
    daysAgo: 5,
    kind: "procedural",
    project_context: { repo: "acme/web", project: "web" },
    content: `# Speeding up CI

The web pipeline now caches ~/.npm and the Next.js build cache (.next/cache) keyed on package-lock.json. Cold builds take 9 minutes, warm ones 3. If a build behaves strangely, bump CACHE_VERSION in .github/workflows/web.yml to invalidate the cache.`,
  },
  {
    key: "nginx-timeout",
    hub: "platform",
    author: "mira",
    daysAgo: 33,
    kind: "procedural",
    content: `# 504 Gateway Timeout on report exports

Large CSV exports hit nginx's default proxy_read_timeout of 60s. In /etc/nginx/conf.d/api.conf we raised proxy_read_timeout to 300s for the /exports location only, and the export job now streams rows instead of building the file in memory.`,
  },
  {
    key: "log-retention",
    hub: "platform",
    author: "ann",
    daysAgo: 120,
    kind: "rationale",
    content: `# Log retention decision

Application logs are kept 14 days in Loki and 1 year in cold storage (S3 Glacier). We decided against 90 days hot retention: it tripled the Loki bill and nobody queried logs older than ten days in the last quarter.`,
  },
  {
    key: "feature-flags",
    hub: "platform",
    author: "mira",
    daysAgo: 15,
    kind: "semantic",
    content: `# Feature flags

Flags live in Unleash. Naming: <team>.<feature>, e.g. payments.new_checkout. Every flag needs an owner and a removal date in its description; flags older than 90 days show up in the weekly cleanup report.`,
  },
  {
    key: "oncall",
    hub: "platform",
    author: "kenji",
    daysAgo: 8,
    kind: "procedural",
    content: `# On-call handover

Handover happens Mondays at 10:00 CET. The outgoing engineer writes open incidents and flaky alerts in the #oncall channel and reassigns PagerDuty schedules. Escalate SEV1 to the engineering manager within 15 minutes.`,
  },
  {
    key: "staging-reset",
    hub: "platform",
    author: "kenji",
    daysAgo: 2,
    kind: "episodic",
    content: `Reset the staging database today because the seed data drifted from production shapes. Ran scripts/reset-staging.sh, which restores the anonymised snapshot from last Friday. Staging was down for 20 minutes.`,
  },
  {
    key: "docker-compose-ports",
    hub: "platform",
    author: "mira",
    daysAgo: 50,
    kind: "semantic",
    content: `# Local development ports

docker-compose.yml exposes Postgres on 5433 (not 5432, to avoid clashing with a local install), Redis on 6380, MinIO on 9000 with the console on 9001, and Mailpit on 8025.`,
  },
  {
    key: "secrets-rotation",
    hub: "platform",
    author: "ann",
    daysAgo: 45,
    kind: "procedural",
    content: `# Rotating the Twilio API key

1. Create a new key in the Twilio console under API keys.
2. Store it in Vault at secret/notifications/twilio_api_key.
3. Restart the notifications service so it picks up the new key.
4. Revoke the old key after 24 hours once no requests use it.`,
  },
  {
    key: "k8s-limits",
    hub: "platform",
    author: "kenji",
    daysAgo: 80,
    kind: "rationale",
    content: `# Why api pods have no CPU limit

We set CPU requests but no CPU limits on the api deployment. CFS throttling under limits caused p99 latency spikes of 300 ms even at 40% average usage. Memory limits stay, because memory is not compressible.`,
  },
  // ── payments ───────────────────────────────────────────────────────────
  {
    key: "stripe-webhooks",
    hub: "payments",
    author: "mira",
    daysAgo: 30,
    kind: "procedural",
    content: `# Stripe webhooks

Webhooks arrive at /webhooks/stripe and are verified with the signing secret STRIPE_WEBHOOK_SECRET. Handlers must be idempotent: we store event.id in processed_events and skip duplicates. To test locally run \`stripe listen --forward-to localhost:3000/webhooks/stripe\`.`,
  },
  {
    key: "refund-policy",
    hub: "payments",
    author: "lucia",
    daysAgo: 100,
    kind: "semantic",
    content: `# Refund policy

Customers can get a full refund within 14 days of purchase. After 14 days we offer account credit instead. Refunds above 500 EUR need approval from finance. Chargebacks are handled by the disputes team, not support.`,
  },
  {
    key: "idempotency-keys",
    hub: "payments",
    author: "mira",
    daysAgo: 55,
    kind: "rationale",
    content: `# Why every payment call carries an idempotency key

Network timeouts made clients retry charge requests, and twice in March a customer was charged twice. Every POST to the payment provider now sends Idempotency-Key = order_id + attempt scope, so retries return the original result instead of creating a second charge.`,
  },
  {
    key: "currency-rounding",
    hub: "payments",
    author: "lucia",
    daysAgo: 20,
    kind: "semantic",
    content: `# Money handling

Amounts are stored as integer minor units (cents) in bigint columns, never floats. Currency conversion uses banker's rounding (round half to even) and the ECB reference rate of the previous business day. JPY has no minor unit, so 1 JPY is stored as 1.`,
  },
  {
    key: "payout-failed",
    hub: "payments",
    author: "mira",
    daysAgo: 3,
    kind: "episodic",
    content: `# Payout failures for Dutch merchants

Yesterday's payout run failed for 41 merchants with error code PAYOUT_IBAN_INVALID. The new bank validation rejected IBANs with lowercase letters. We normalise IBANs to upper case before validation now and re-ran the payouts manually.`,
  },
  {
    key: "vat-rules",
    hub: "payments",
    author: "lucia",
    daysAgo: 140,
    kind: "semantic",
    content: `# VAT on invoices

B2B customers inside the EU with a valid VAT ID are invoiced with reverse charge (0%) and the note "Reverse charge – Article 196 Council Directive 2006/112/EC". B2C customers pay the VAT rate of their country; the rate table is in billing/vat_rates.json.`,
  },
  {
    key: "checkout-ab-test",
    hub: "payments",
    author: "mira",
    daysAgo: 18,
    kind: "episodic",
    content: `# Checkout A/B test result

The one-page checkout (flag payments.new_checkout) raised conversion from 3.1% to 3.4% over two weeks with 48k sessions per arm; the difference is significant at p=0.02. We are rolling it out to 100% next sprint.`,
  },
  {
    key: "dispute-evidence",
    hub: "payments",
    author: "lucia",
    daysAgo: 65,
    kind: "procedural",
    content: `# Submitting chargeback evidence

Collect the order confirmation, delivery proof and customer communication, then upload them in the Stripe dashboard under Disputes within 7 days. Mark the dispute in our admin panel so the finance report counts it as contested.`,
  },
  // ── mobile ─────────────────────────────────────────────────────────────
  {
    key: "ios-release",
    hub: "mobile",
    author: "kenji",
    daysAgo: 22,
    kind: "procedural",
    content: `# Shipping the iOS app

Bump CFBundleShortVersionString in Info.plist, run \`fastlane ios beta\` to upload to TestFlight, wait for the build to process, then submit for review with \`fastlane ios release\`. App Review usually takes one to two days.`,
  },
  {
    key: "android-signing",
    hub: "mobile",
    author: "kenji",
    daysAgo: 75,
    kind: "procedural",
    content: `# Android release signing

The upload keystore is android/app/upload-keystore.jks; passwords are in 1Password under "Android upload key". Google Play App Signing holds the real signing key, so a lost upload key can be reset through Play Console support.`,
  },
  {
    key: "push-notifications",
    hub: "mobile",
    author: "kenji",
    daysAgo: 35,
    kind: "semantic",
    content: `# Push notifications

We send pushes through Firebase Cloud Messaging for both platforms; APNs certificates are uploaded to Firebase. Device tokens are stored in device_tokens with the user id and refreshed on every app start.`,
  },
  {
    key: "crash-rn-upgrade",
    hub: "mobile",
    author: "ann",
    daysAgo: 9,
    kind: "episodic",
    content: `# Crash after React Native 0.76 upgrade

After upgrading React Native to 0.76 the Android app crashed on launch with \`java.lang.UnsatisfiedLinkError: couldn't find DSO to load: libhermes.so\`. Cause: a stale Gradle cache. \`cd android && ./gradlew clean\` and reinstalling pods fixed it.`,
  },
  {
    key: "offline-sync",
    hub: "mobile",
    author: "kenji",
    daysAgo: 110,
    kind: "rationale",
    content: `# Why offline sync uses a local SQLite queue

Users in trains lose connectivity for minutes. Instead of failing writes we append them to a SQLite outbox and replay them in order when the connection returns. We rejected CRDTs as too complex for our mostly single-writer data.`,
  },
  // ── support hub (Ann, Lucia, Bob) ───────────────────────────────────────
  {
    key: "password-reset-support",
    hub: "support",
    author: "lucia",
    daysAgo: 28,
    kind: "procedural",
    content: `# Customer cannot reset their password

Check that the reset e-mail was not caught by their spam filter, then look up the user in the admin panel and click "Send reset link". Reset links expire after 1 hour. If the account uses Google sign-in there is no password to reset.`,
  },
  {
    key: "sla",
    hub: "support",
    author: "bob",
    daysAgo: 150,
    kind: "semantic",
    content: `# Support SLAs

Enterprise: first response within 1 hour, 24/7. Business: within 4 business hours. Free plan: best effort, usually within 2 days.`,
  },
  {
    key: "gdpr-export",
    hub: "support",
    author: "lucia",
    daysAgo: 42,
    kind: "procedural",
    content: `# GDPR data export requests

Verify the requester owns the account (reply from the account's e-mail address), then run the export from Admin → Users → Export data. The archive is e-mailed within 30 minutes; we must answer within one month by law.`,
  },
  // ── Ann's personal hub ──────────────────────────────────────────────────
  {
    key: "ann-vim",
    hub: "ann",
    author: "ann",
    daysAgo: 200,
    kind: "semantic",
    content: `My editor setup: Neovim with lazy.nvim, telescope for fuzzy finding, and the tokyonight theme. Leader key is space.`,
  },
  {
    key: "ann-1on1",
    hub: "ann",
    author: "ann",
    daysAgo: 6,
    kind: "episodic",
    content: `1:1 with Mira: she wants to own the payments reliability work next quarter and asked for a budget for a second on-call rotation. Follow up with the engineering manager by Friday.`,
  },
  {
    key: "ann-reading",
    hub: "ann",
    author: "ann",
    daysAgo: 95,
    kind: "semantic",
    content: `Reading notes — "Designing Data-Intensive Applications", chapter 7: snapshot isolation prevents dirty reads and non-repeatable reads but still allows write skew; serializable snapshot isolation detects it at commit time.`,
  },
  {
    key: "ann-git-alias",
    hub: "ann",
    author: "ann",
    daysAgo: 300,
    kind: "procedural",
    content: `Useful git aliases in ~/.gitconfig: \`lg = log --graph --oneline --decorate\`, \`undo = reset --soft HEAD~1\`, \`fixup = commit --fixup\`. Use \`git rebase -i --autosquash\` after fixup commits.`,
  },
  {
    key: "ann-archived-old-deploy",
    hub: "ann",
    author: "ann",
    daysAgo: 400,
    archived: true,
    kind: "procedural",
    content: `# Old deploy process (obsolete)

Deploy by SSHing into app-01 and running ./deploy.sh, then restart unicorn with \`sudo systemctl restart unicorn\`.`,
  },
  // ── code and config snippets ────────────────────────────────────────────
  {
    key: "retry-util",
    hub: "platform",
    author: "kenji",
    daysAgo: 27,
    kind: "semantic",
    content: `// lib/retry.ts — exponential backoff with full jitter
export async function retryWithBackoff<T>(fn: () => Promise<T>, attempts = 5, baseMs = 100): Promise<T> {
  for (let i = 0; ; i++) {
    try { return await fn(); } catch (error) {
      if (i >= attempts - 1) throw error;
      await sleep(Math.random() * baseMs * 2 ** i);
    }
  }
}`,
  },
  {
    key: "get-user-by-id",
    hub: "platform",
    author: "mira",
    daysAgo: 48,
    kind: "semantic",
    content: `getUserById in services/users/repository.ts caches users for 60 seconds in an LRU of 10k entries. Call invalidateUser(id) after any profile change, otherwise other pods serve stale names for up to a minute.`,
  },
  {
    key: "rate-limit-config",
    hub: "platform",
    author: "ann",
    daysAgo: 14,
    kind: "semantic",
    content: `# API rate limits

Public API limits are configured in config/rate_limits.yaml: 300 requests per minute for regular endpoints, 60 for search and export (heavy bucket), 600 for health checks. The limiter is a sliding window in Redis keyed by API key.`,
  },
  {
    key: "env-vars",
    hub: "platform",
    author: "mira",
    daysAgo: 38,
    kind: "semantic",
    content: `# Environment variables of the api

DATABASE_URL (Postgres), REDIS_URL, S3_BUCKET, SENTRY_DSN, and LOG_LEVEL (default info). FEATURE_FLAGS_URL points at Unleash. Never commit .env files; .env.example lists every variable with a dummy value.`,
  },
  {
    key: "sentry-sampling",
    hub: "platform",
    author: "kenji",
    daysAgo: 19,
    kind: "rationale",
    content: `# Sentry sampling

We sample 10% of transactions (tracesSampleRate=0.1) but keep 100% of errors. Full tracing cost 4x our plan's quota within a week.`,
  },
  // ── multilingual ─────────────────────────────────────────────────────────
  {
    key: "zh-db-backup",
    hub: "platform",
    author: "kenji",
    daysAgo: 32,
    kind: "procedural",
    content: `# 数据库备份

生产数据库每天凌晨三点自动备份到对象存储，保留三十天。恢复时先在预发布环境验证备份文件，再切换到生产环境。`,
  },
  {
    key: "zh-cache-policy",
    hub: "platform",
    author: "kenji",
    daysAgo: 29,
    kind: "semantic",
    content: `# 缓存策略

用户资料缓存六十秒，商品目录缓存十分钟。更新商品价格后必须手动清除缓存，否则页面会显示旧价格。`,
  },
  {
    key: "ja-release-notes",
    hub: "mobile",
    author: "kenji",
    daysAgo: 21,
    kind: "procedural",
    content: `# リリースノートの書き方

リリースノートはユーザー向けに簡潔に書きます。新機能、改善、バグ修正の三つに分けて、社内用語は使わないでください。`,
  },
  {
    key: "ja-timezone",
    hub: "mobile",
    author: "kenji",
    daysAgo: 58,
    kind: "semantic",
    content: `# タイムゾーンの扱い

サーバーでは日時をすべてUTCで保存し、表示するときだけ端末のタイムゾーンに変換します。日本のユーザーはJSTで表示されます。`,
  },
  {
    key: "de-onboarding",
    hub: "support",
    author: "lucia",
    daysAgo: 44,
    kind: "procedural",
    content: `# Onboarding neuer Support-Mitarbeiter

In der ersten Woche lesen neue Kolleginnen und Kollegen die Wissensdatenbank und begleiten erfahrene Agents bei Live-Chats. Ab der zweiten Woche beantworten sie einfache Tickets selbst.`,
  },
  {
    key: "es-invoices",
    hub: "payments",
    author: "lucia",
    daysAgo: 52,
    kind: "procedural",
    content: `# Facturas rectificativas

Cuando un cliente español necesita corregir una factura, emitimos una factura rectificativa con referencia a la original; nunca se modifica una factura ya emitida.`,
  },
  // ── Bob's private hub: Ann must never see these ──────────────────────────
  {
    key: "bob-deploy-secret",
    hub: "bob_private",
    author: "bob",
    daysAgo: 10,
    kind: "procedural",
    content: `# Production deploy shortcut

Skip the runbook: run kubectl rollout restart deployment/api -n prod directly, migrations can wait. Database password for prod is in my notes.`,
  },
  {
    key: "bob-salary",
    hub: "bob_private",
    author: "bob",
    daysAgo: 11,
    kind: "episodic",
    content: `Salary negotiation notes: asked for a raise after the Stripe webhooks project; manager said next review cycle.`,
  },
  {
    key: "bob-postgres",
    hub: "bob_private",
    author: "bob",
    daysAgo: 13,
    kind: "semantic",
    content: `# Postgres connection pool sizing for my side project

max pool size 50, PgBouncer session mode.`,
  },
  // ── more platform/payments variety (distractors and targets) ────────────
  {
    key: "kafka-consumer-lag",
    hub: "platform",
    author: "mira",
    daysAgo: 17,
    kind: "episodic",
    content: `# Kafka consumer lag on orders topic

Consumer group order-projector fell 2M messages behind after a rebalance storm. Raising session.timeout.ms to 45s and max.poll.interval.ms to 10 minutes stopped the rebalances; lag drained within an hour.`,
  },
  {
    key: "ssl-renewal",
    hub: "platform",
    author: "kenji",
    daysAgo: 66,
    kind: "procedural",
    content: `# TLS certificates

Certificates are issued by cert-manager with Let's Encrypt (ClusterIssuer letsencrypt-prod) and renew automatically 30 days before expiry. If a renewal is stuck, describe the Certificate resource and check the ACME challenge.`,
  },
  {
    key: "db-index-slow-query",
    hub: "platform",
    author: "ann",
    daysAgo: 7,
    kind: "episodic",
    content: `# Slow orders query fixed

The orders list endpoint took 4 s for large merchants. EXPLAIN ANALYZE showed a sequential scan on orders filtered by merchant_id and created_at. Added CREATE INDEX CONCURRENTLY orders_merchant_created_idx ON orders (merchant_id, created_at DESC); p95 dropped to 40 ms.`,
  },
  {
    key: "api-versioning",
    hub: "platform",
    author: "mira",
    daysAgo: 130,
    kind: "rationale",
    content: `# API versioning

We version the public API in the URL path (/v1, /v2) rather than with headers, because customers debug with curl and browser address bars, and path versions show up in logs. A version is supported for 18 months after its successor ships.`,
  },
  {
    key: "backup-restore-drill",
    hub: "platform",
    author: "mira",
    daysAgo: 4,
    kind: "episodic",
    content: `# Restore drill

Quarterly restore drill: restored last night's Postgres backup into a scratch cluster in 38 minutes, within the 1 hour RTO. Point-in-time recovery to 02:00 worked using the WAL archive.`,
  },
  {
    key: "payments-monitoring",
    hub: "payments",
    author: "mira",
    daysAgo: 26,
    kind: "semantic",
    content: `# Payment success rate alert

An alert fires when the card payment success rate drops below 92% over 15 minutes. Most past alerts were caused by a single issuing bank declining, which we cannot fix; check the decline codes breakdown before paging anyone.`,
  },
  {
    key: "invoice-pdf",
    hub: "payments",
    author: "lucia",
    daysAgo: 88,
    kind: "semantic",
    content: `# Invoice PDFs

Invoices are rendered as PDFs with a headless Chromium worker from HTML templates in billing/templates. Numbers are sequential per legal entity (ACME-DE-2024-000123) and must never have gaps.`,
  },
  {
    key: "mobile-deeplinks",
    hub: "mobile",
    author: "kenji",
    daysAgo: 47,
    kind: "semantic",
    content: `# Deep links

Universal links (iOS) and App Links (Android) use https://acme.app/open/<path>. The apple-app-site-association and assetlinks.json files are served from the web app's public/.well-known folder.`,
  },
  {
    key: "web-accessibility",
    hub: "platform",
    author: "ann",
    daysAgo: 160,
    kind: "rationale",
    content: `# Accessibility baseline

We target WCAG 2.1 AA. Every interactive element must be reachable by keyboard, and color contrast is checked in CI with axe-core. We chose to block merges on axe violations after a customer audit found 40 issues.`,
  },
  {
    key: "meeting-notes-q3",
    hub: "platform",
    author: "kenji",
    daysAgo: 1,
    kind: "episodic",
    content: `Platform sync notes: agreed to move the cron jobs from the VM to Kubernetes CronJobs next sprint; Kenji owns the migration. Mira will retire the old Jenkins server after that.`,
  },
  {
    key: "search-relevance",
    hub: "platform",
    author: "mira",
    daysAgo: 36,
    kind: "semantic",
    content: `# Product search

Product search runs on OpenSearch with a BM25 index on title and description, boosted by sales rank. Synonyms (tee → t-shirt, sneakers → trainers) are maintained in search/synonyms.txt and reloaded without reindexing.`,
  },
  {
    key: "mira-cost-review",
    hub: "platform",
    author: "mira",
    daysAgo: 16,
    kind: "episodic",
    content: `# Cloud cost review

The AWS bill grew 18% month over month. Biggest items: NAT gateway data transfer (the image service pulls from S3 through NAT) and idle RDS read replicas. Plan: S3 gateway endpoint and removing one replica.`,
  },
  {
    key: "support-macros",
    hub: "support",
    author: "lucia",
    daysAgo: 23,
    kind: "procedural",
    content: `# Zendesk macros

Use the "Billing – duplicate charge" macro when a customer reports being charged twice; it asks for the last four card digits and the order number and tags the ticket payments-escalation.`,
  },
  {
    key: "lucia-holiday",
    hub: "support",
    author: "lucia",
    daysAgo: 3,
    kind: "episodic",
    content: `I'm out from the 20th for two weeks; Bob covers the enterprise queue and the GDPR requests while I'm away.`,
  },
];

export const QUERIES: EvalQuery[] = [
  // ── paraphrases ────────────────────────────────────────────────────────
  { id: "p-ship-prod", category: "paraphrase", query: "how do we ship a new release of the backend to production?", relevant: { "deploy-runbook": 3, "ci-cache": 1 }, harmful: ["bob-deploy-secret", "ann-archived-old-deploy"] },
  { id: "p-undo-release", category: "paraphrase", query: "the release is broken, how do I go back to the previous version?", relevant: { "deploy-runbook": 3 }, harmful: ["bob-deploy-secret", "ann-archived-old-deploy"] },
  { id: "p-too-many-db-conn", category: "paraphrase", query: "why not just raise max_connections on the database?", relevant: { "why-pgbouncer": 3, "pg-pool": 2 }, harmful: ["bob-postgres"] },
  { id: "p-double-charge", category: "paraphrase", query: "customers got billed twice when requests were retried", relevant: { "idempotency-keys": 3, "support-macros": 2 }, harmful: ["bob-salary"] },
  { id: "p-money-floats", category: "paraphrase", query: "can I use a float column for prices?", relevant: { "currency-rounding": 3 } },
  { id: "p-app-store", category: "paraphrase", query: "steps to publish the iPhone app to the App Store", relevant: { "ios-release": 3 } },
  { id: "p-phone-offline", category: "paraphrase", query: "what happens to writes when the phone has no signal?", relevant: { "offline-sync": 3 } },
  { id: "p-old-logs", category: "paraphrase", query: "how long do we keep logs around?", relevant: { "log-retention": 3 } },
  { id: "p-throttling", category: "paraphrase", query: "latency spikes caused by CPU throttling of containers", relevant: { "k8s-limits": 3 } },
  { id: "p-gateway-timeout", category: "paraphrase", query: "big report downloads time out at the proxy", relevant: { "nginx-timeout": 3 } },
  { id: "p-stale-profile", category: "paraphrase", query: "users see an old display name after renaming themselves", relevant: { "get-user-by-id": 3 } },
  { id: "p-forgot-password", category: "paraphrase", query: "a customer says they can't log in because they forgot their password", relevant: { "password-reset-support": 3 } },
  { id: "p-restore-time", category: "paraphrase", query: "how long did it take to recover the database from backup?", relevant: { "backup-restore-drill": 3, "zh-db-backup": 1 } },
  { id: "p-cloud-bill", category: "paraphrase", query: "why did our cloud spending go up?", relevant: { "mira-cost-review": 3 } },
  { id: "p-memory-leak-workers", category: "paraphrase", query: "indexer pods kept running out of memory", relevant: { "oom-incident": 3 } },
  { id: "p-new-hire-support", category: "paraphrase", query: "what does a new support agent do in their first week?", relevant: { "de-onboarding": 3 } },
  // ── identifiers and exact terms ─────────────────────────────────────────
  { id: "i-econnreset", category: "identifier", query: "ECONNRESET", relevant: { "econnreset-incident": 3 } },
  { id: "i-payout-code", category: "identifier", query: "PAYOUT_IBAN_INVALID", relevant: { "payout-failed": 3 } },
  { id: "i-compose-file", category: "identifier", query: "docker-compose.yml postgres port", relevant: { "docker-compose-ports": 3 } },
  { id: "i-hermes", category: "identifier", query: "couldn't find DSO to load: libhermes.so", relevant: { "crash-rn-upgrade": 3 } },
  { id: "i-getuserbyid", category: "identifier", query: "getUserById", relevant: { "get-user-by-id": 3 } },
  { id: "i-rate-limits-file", category: "identifier", query: "rate_limits.yaml", relevant: { "rate-limit-config": 3 } },
  { id: "i-stripe-secret", category: "identifier", query: "where is STRIPE_WEBHOOK_SECRET used", relevant: { "stripe-webhooks": 3 } },
  { id: "i-force-unlock", category: "identifier", query: "terraform force-unlock state lock", relevant: { "terraform-state": 3 } },
  { id: "i-index-name", category: "identifier", query: "orders_merchant_created_idx", relevant: { "db-index-slow-query": 3 } },
  { id: "i-traces-sample", category: "identifier", query: "tracesSampleRate", relevant: { "sentry-sampling": 3 } },
  // ── keyword-ish questions ────────────────────────────────────────────────
  { id: "k-kafka-lag", category: "keyword", query: "kafka consumer lag rebalance", relevant: { "kafka-consumer-lag": 3 } },
  { id: "k-vat-reverse", category: "keyword", query: "reverse charge VAT for EU business customers", relevant: { "vat-rules": 3 } },
  { id: "k-refund-window", category: "keyword", query: "refund after 14 days", relevant: { "refund-policy": 3 } },
  { id: "k-cert-renewal", category: "keyword", query: "let's encrypt certificate renewal stuck", relevant: { "ssl-renewal": 3 } },
  { id: "k-feature-flag-naming", category: "keyword", query: "feature flag naming convention", relevant: { "feature-flags": 3 } },
  { id: "k-env-vars", category: "keyword", query: "which environment variables does the api need?", relevant: { "env-vars": 3 } },
  // ── multilingual ─────────────────────────────────────────────────────────
  { id: "m-zh-backup", category: "multilingual", query: "数据库备份保留多久", relevant: { "zh-db-backup": 3 } },
  { id: "m-zh-cache", category: "multilingual", query: "商品价格缓存", relevant: { "zh-cache-policy": 3 } },
  { id: "m-ja-release", category: "multilingual", query: "リリースノート 書き方", relevant: { "ja-release-notes": 3 } },
  { id: "m-ja-tz", category: "multilingual", query: "タイムゾーン UTC 保存", relevant: { "ja-timezone": 3 } },
  { id: "m-es-invoice", category: "multilingual", query: "factura rectificativa", relevant: { "es-invoices": 3 } },
  // ── temporal ─────────────────────────────────────────────────────────────
  { id: "t-yesterday", category: "temporal", query: "what did we agree on in the platform sync yesterday?", relevant: { "meeting-notes-q3": 3 }, expect: { timeBounded: true } },
  { id: "t-last-week-incidents", category: "temporal", query: "what broke in the last 7 days?", relevant: { "payout-failed": 3, "staging-reset": 2, "backup-restore-drill": 1 }, harmful: ["econnreset-incident", "oom-incident"], expect: { timeBounded: true } },
  { id: "t-last-month-incident", category: "temporal", query: "incidents in the past 2 weeks", relevant: { "econnreset-incident": 3, "payout-failed": 3, "db-index-slow-query": 2, "crash-rn-upgrade": 2 }, harmful: ["oom-incident"], expect: { timeBounded: true } },
  // ── author ───────────────────────────────────────────────────────────────
  { id: "a-mira-payments", category: "author", query: "what did Mira write about payments?", relevant: { "idempotency-keys": 2, "stripe-webhooks": 2, "payout-failed": 2, "payments-monitoring": 2, "checkout-ab-test": 2 }, harmful: ["refund-policy", "vat-rules", "currency-rounding"], expect: { author: "mira" } },
  { id: "a-kenji-mobile", category: "author", query: "notes by Kenji about the Android app", relevant: { "android-signing": 3, "push-notifications": 1, "mobile-deeplinks": 1 }, harmful: ["crash-rn-upgrade"], expect: { author: "kenji" } },
  // ── filters ──────────────────────────────────────────────────────────────
  { id: "f-payments-hub-only", category: "filter", query: "idempotency", hub_ids: ["payments"], relevant: { "idempotency-keys": 3 } },
  { id: "f-rationale-kind", category: "filter", query: "postgres connections", kind: "rationale", relevant: { "why-pgbouncer": 3 }, harmful: ["pg-pool"] },
  // ── negatives: near misses must not appear; nonsense returns nothing ────
  { id: "n-stripe-key-rotation", category: "negative", query: "how do I rotate the SendGrid API key?", relevant: {}, harmful: ["secrets-rotation"] },
  { id: "n-mysql-pool", category: "negative", query: "MySQL connection pool settings for the reporting replica", relevant: {}, harmful: ["redis-pool"] },
  { id: "n-gcp", category: "negative", query: "Google Cloud Spanner migration plan", relevant: {}, harmful: [] },
  { id: "n-nonsense", category: "negative", query: "purple giraffe banana orchestra", relevant: {}, harmful: [] },
  { id: "n-lasagna", category: "negative", query: "best lasagna recipe with béchamel", relevant: {}, harmful: [] },
  { id: "n-bob-salary", category: "negative", query: "salary negotiation raise", relevant: {}, harmful: ["bob-salary"] },
  { id: "n-windows-driver", category: "negative", query: "Windows printer driver installation fails with error 0x80070005", relevant: {}, harmful: [] },
];
