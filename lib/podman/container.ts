// A row of `podman ps --all --format=json`: what the agent reads of each container.

export interface Container {
  readonly Id: string;
  readonly Names?: readonly string[];
  readonly State?: string;
  readonly ExitCode?: number;
  readonly Labels?: Readonly<Record<string, string>> | null;
  readonly Pod?: string;
  readonly IsInfra?: boolean;
}
