// Another way to an engine than a process of its CLI per call (an engine's running service): what the CLI runner
// (lib/runtimes/base/cli.ts) asks of it, and how a routed call finds out that its way went.

/**
 * How a call goes other than by starting the CLI anew: through an engine's running service (a runtime's own,
 * which plans each call), answered by it (`answer`, its text as the CLI prints it) or by the CLI's
 * client of it (`args`); or locally, with the reason (`why`).
 */
export type Plan =
  | { readonly via: 'service'; readonly args: readonly string[]; readonly progressPid?: number }
  | { readonly via: 'service'; readonly answer: (deadlineMs: number) => Promise<string> }
  | { readonly via: 'cli'; readonly why: string };

/** A way to the engine that a call may take instead of a process of its own (the CLI's `route`). */
export interface CallRoute {
  plan(args: readonly string[]): Plan;
  /** Whether a routed call's failure says the way is gone (not the engine's answer): the call then runs locally. */
  lost(message: string): boolean;
  /** Told of a routed call that failed by `lost` words or ran long: it decides whether the way is down and mends it. */
  failed(why: string): void;
  /** Whether the way still answers within `withinMs` (asked of a routed call that runs long). */
  alive(withinMs: number): Promise<boolean>;
}

/** A routed call's way went: the call is run again locally. */
export class RouteLost extends Error {}

/** How often a routed call still running asks whether its way answers (a stalled service ends it at once, not at its deadline). */
const ROUTE_PROBE_MS = 2000;

/** Asks `route` every ROUTE_PROBE_MS whether it answers; `lost` hears of the first time it does not. Returns the timer. */
export const probeRoute = (route: CallRoute, lost: (err: RouteLost) => void): NodeJS.Timeout =>
  setInterval(() => {
    route.alive(ROUTE_PROBE_MS / 2).then((alive) => alive || lost(new RouteLost(`the service did not answer within ${ROUTE_PROBE_MS / 2000} s`)));
  }, ROUTE_PROBE_MS);
