import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ActionRunner } from './processing/action-runner.js';
import { StepRunner } from './processing/step-runner.js';
import { ServiceClient } from './actions/service-client.js';
import { AdminActionsController } from './admin/admin-actions.controller.js';
import { AdminActionsService } from './admin/admin-actions.service.js';
import { AdminExecutionsService } from './admin/admin-executions.service.js';
import { AdminEventsController } from './admin/admin-events.controller.js';
import { AdminExecutionsController } from './admin/admin-executions.controller.js';
import { AdminRulesController } from './admin/admin-rules.controller.js';
import { AdminRulesService } from './admin/admin-rules.service.js';
import { ApiRulesService } from './rules/api-rules.service.js';
import { AdminQueryService } from './admin/admin-query.service.js';
import { AdminReplicasController } from './admin/admin-replicas.controller.js';
import { AdminReplicasService } from './admin/admin-replicas.service.js';
import { AdminGuard } from './admin/admin.guard.js';
import { CLOCK, type Clock, systemClock } from './clock.js';
import { ENGINE_CONFIG, type EngineConfig } from './config/config.js';
import { dataSourceOptions, ENTITIES } from './database/data-source.js';
import { Database } from './database/database.service.js';
import { ErrorFilter } from './http/error.filter.js';
import { EventWriter } from './intake/event-writer.js';
import { IntakeController } from './intake/intake.controller.js';
import { IntakeService } from './intake/intake.service.js';
import { Schedules } from './processing/schedules.js';
import { HealthController } from './admin/health.controller.js';
import { MetricsController } from './admin/metrics.controller.js';
import { Metrics } from './observability/metrics.js';
import { EventProcessor } from './processing/event-processor.js';
import { ExecutionProgress } from './processing/execution-progress.js';
import { RunRequests } from './processing/run-request.js';
import { WorkQueue } from './processing/work-queue.js';
import { Workers } from './processing/workers.js';
import { Retention } from './processing/retention.js';
import { Replicas } from './processing/replicas.js';
import { RuleRegistry } from './rules/rule-registry.service.js';
import { RuleWatcher } from './rules/rule-watcher.js';
import { AdminEventContextService } from './admin/admin-event-context.service.js';
import { AdminLiveController } from './admin/admin-live.controller.js';
import { AdminOverviewController } from './admin/admin-overview.controller.js';
import { AdminOverviewService } from './admin/admin-overview.service.js';
import { EventFeed } from './admin/event-feed.js';
import { AttemptJournal, JournaledServiceClient } from './console/attempt-journal.js';
import { ConsoleAssets } from './console/console-assets.js';
import { ConsolePageController } from './console/console.controller.js';
import { ConsoleSessionController } from './console/console-session.controller.js';
import { ConsoleSessions } from './console/console-sessions.js';

const CONTROLLERS = [
  IntakeController,
  AdminRulesController,
  AdminEventsController,
  AdminExecutionsController,
  AdminActionsController,
  HealthController,
  MetricsController,
  AdminOverviewController,
  AdminLiveController,
  AdminReplicasController,
  // console: the session routes before the page's catch-all /console/*path
  ConsoleSessionController,
  ConsolePageController,
];

const SERVICES = [
  Database,
  Metrics,
  // intake
  EventWriter,
  IntakeService,
  // rules
  RuleRegistry,
  ApiRulesService,
  RuleWatcher,
  // actions (the console's journal remembers each attempt the client makes)
  AttemptJournal,
  { provide: ServiceClient, useClass: JournaledServiceClient },
  // processing
  WorkQueue,
  EventProcessor,
  RunRequests,
  ExecutionProgress,
  ActionRunner,
  StepRunner,
  Workers,
  Schedules,
  Retention,
  Replicas,
  // admin
  AdminGuard,
  AdminQueryService,
  AdminRulesService,
  AdminActionsService,
  AdminExecutionsService,
  AdminOverviewService,
  AdminEventContextService,
  AdminReplicasService,
  EventFeed,
  // console
  ConsoleSessions,
  ConsoleAssets,
];

/** Composition only: intake stores events; processing moves them through rules and actions; storage under all. */
@Module({})
export class AppModule {
  static forConfig(config: EngineConfig, clock: Clock = systemClock): DynamicModule {
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot(dataSourceOptions(config.databaseUrl)),
        TypeOrmModule.forFeature(ENTITIES),
        ScheduleModule.forRoot(),
      ],
      controllers: CONTROLLERS,
      providers: [
        { provide: ENGINE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: clock },
        { provide: APP_FILTER, useClass: ErrorFilter },
        ...SERVICES,
      ],
    };
  }
}
