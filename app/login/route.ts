// GET /login — where Memax's SDK sends providerLoginURL("email"): the dashboard's sign-in, its query (the provider hint, callbackUrl) kept
export async function GET(req: Request): Promise<Response> {
  const { search } = new URL(req.url);
  return new Response(null, { status: 307, headers: { location: `/sign-in${search}`, "cache-control": "no-store" } });
}
