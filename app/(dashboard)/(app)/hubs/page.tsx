import type { Metadata } from "next";
import { HubsPage } from "@/components/hubs-page.tsx";

export const metadata: Metadata = { title: "Hubs" };

export default function Page() {
  return <HubsPage />;
}
