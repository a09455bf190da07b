/**
 * `npm run simulator`: the stand-in service on SIMULATOR_PORT (default 4010),
 * configured from the environment (see simulator.config.ts), until SIGINT/SIGTERM.
 */
import { describeListening, simulatorOptionsFromEnv, SimulatorConfigError } from './simulator.config.js';
import { startSimulator } from './simulator.js';

async function main(): Promise<void> {
  let options;
  try {
    options = simulatorOptionsFromEnv(process.env);
  } catch (err) {
    if (!(err instanceof SimulatorConfigError)) throw err;
    console.error(`simulator: invalid configuration: ${err.message}`);
    process.exit(1);
  }
  if (options.webhookSecret === undefined) {
    console.log('simulator: WEBHOOK_SECRET is not set, so webhooks are not sent (they are still listed at /_sim/webhooks)');
  }
  const simulator = await startSimulator(options);
  console.log(describeListening(simulator.url, options));

  const stop = (signal: string): void => {
    console.log(`simulator: ${signal} received, closing`);
    simulator.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err: unknown) => {
  console.error(`simulator: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
