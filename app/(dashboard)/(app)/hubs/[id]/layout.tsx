import { HubFrame } from "@/components/hub-frame.tsx";

export default async function HubLayout({ children, params }: { children: React.ReactNode; params: Promise<{ id: string }> }) {
  const { id } = await params;
  return <HubFrame hubId={id}>{children}</HubFrame>;
}
