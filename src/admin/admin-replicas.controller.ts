import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { AdminRoute } from '../http/openapi.js';
import { AdminGuard } from './admin.guard.js';
import { AdminReplicasService } from './admin-replicas.service.js';

@ApiTags('replicas')
@Controller('admin/replicas')
@UseGuards(AdminGuard)
export class AdminReplicasController {
  constructor(private readonly replicas: AdminReplicasService) {}

  @Get()
  @AdminRoute('The engine processes (replicas) on this database: alive, dead or stopped, work in hand, work done; `self` is the one answering', 200, 'ReplicaList')
  list() {
    return this.replicas.list();
  }
}
