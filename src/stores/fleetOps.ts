import { type FleetState, type HeartbeatRequest, heartbeat } from '../algorithms/fleet.js';
import { replyNumber } from './reply.js';
import type { Operation } from './store.js';

export const fleetHeartbeat: Operation<FleetState, HeartbeatRequest, number> = {
  script: 'fleet_heartbeat',
  apply: heartbeat,
  args: (r) => [r.id, r.windowMs],
  parse: (reply) => replyNumber(reply, 'fleet size', 'fleet_heartbeat'),
};
