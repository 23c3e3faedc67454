// The systemd module: the `systemd` runtime, its units' states kept by systemd's own news (one bus bridge for
// the system manager's units) and checked by `systemctl show`; a manager other general options select is polled.
import { unitNews } from './events.js';
import type { RuntimeModule } from '../base/module.js';
import { SystemdRuntime, busConversation, showUnits, unitRecord } from './runtime.js';
import { UnitWatch } from './unit-watch.js';

/** How many managers (general options) have a watch at once. */
const MAX_SCOPES = 64;

export const systemdModule: RuntimeModule = {
  names: ['systemd'],
  make(context) {
    const systemctl = context.cli('systemctl');
    const bridge = context.cli('systemd-stdio-bridge');
    const watches = new Map<string, UnitWatch>();
    const watchIn = (options: readonly string[]): UnitWatch => {
      const key = options.join('\0');
      let watch = watches.get(key);
      if (!watch) {
        if (watches.size >= MAX_SCOPES) watches.delete(watches.keys().next().value!);
        watch = new UnitWatch({
          news: options.length === 0 && context.config.events ? (wanted) => unitNews(busConversation(bridge), wanted) : undefined,
          show: (units) => showUnits(systemctl, options, units),
        });
        watches.set(key, watch);
      }
      return watch;
    };
    return {
      connectors: new Map([
        [
          'systemd',
          new SystemdRuntime(
            systemctl,
            context.cli('journalctl'),
            watchIn,
            unitRecord(context.config.folder, (text) => context.log.warn(text)),
          ),
        ],
      ]),
    };
  },
};
