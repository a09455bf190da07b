/**
 * How busy the whole machine was over a run, from the kernel's counters in
 * /proc/stat: every process on it, the engine, its database server, the
 * benchmark itself and whatever else shares the machine. An open loop that
 * falls behind on a machine whose cores were all busy was short of CPU, not
 * only slow; on one with cores to spare the engine itself was the limit.
 * Linux only: elsewhere there is no figure (undefined), and the tables say so.
 */
import { readFileSync } from 'node:fs';

/** The kernel's CPU time counters (clock ticks), summed over all cores. */
export interface MachineTicks {
  busy: number;
  total: number;
}

/**
 * The first line of /proc/stat: `cpu  user nice system idle iowait irq softirq steal guest guest_nice`. Idle and
 * iowait are time no core worked; guest time is counted in user already (proc(5)), so it is left out of the total.
 */
export function parseProcStat(text: string): MachineTicks | undefined {
  const line = text.split('\n', 1)[0] ?? '';
  const fields = line.trim().split(/\s+/);
  if (fields[0] !== 'cpu' || fields.length < 5) return undefined;
  const [user, nice, system, idle, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields.slice(1, 9).map(Number);
  if (![user, nice, system, idle, iowait, irq, softirq, steal].every(Number.isFinite)) return undefined;
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

export function machineTicks(): MachineTicks | undefined {
  try {
    return parseProcStat(readFileSync('/proc/stat', 'utf8'));
  } catch {
    return undefined;
  }
}

/** The share of all the machine's cores that were busy between two readings, in percent (undefined without both). */
export function busyPercent(start: MachineTicks | undefined, end: MachineTicks | undefined): number | undefined {
  if (start === undefined || end === undefined) return undefined;
  const total = end.total - start.total;
  return total > 0 ? ((end.busy - start.busy) / total) * 100 : undefined;
}
