import type { Metadata } from "next";
import { HubSettings } from "@/components/hub-settings.tsx";

export const metadata: Metadata = { title: "Hub settings" };

export default function SettingsPage() {
  return <HubSettings />;
}
