import { HubMemories } from "@/components/hub-memories.tsx";

export default function HubPage() {
  return <HubMemories />;
}
