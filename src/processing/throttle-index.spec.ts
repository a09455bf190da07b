/**
 * The throttle's count reads idx_executions_throttle, which holds only the
 * executions with a throttle key (migration 1765900000000): the count always
 * names a key, so SQLite, which uses a partial index only when the query
 * implies its predicate, still reads it.
 */
import { sqlitePlan, useSqliteSchema } from '../../test/support/storage.js';
import { queryRows } from '../database/sql.js';
import { THROTTLE_COUNT } from './event-commit.js';

describe('the throttle count and its index (SQLite)', () => {
  const db = useSqliteSchema('throttle-index-');

  it('the index holds only executions with a throttle key', async () => {
    const [index] = await queryRows<{ partial: number }>(db().manager, `SELECT partial FROM pragma_index_list('executions') WHERE name = 'idx_executions_throttle'`);
    expect(index).toEqual({ partial: 1 });
  });

  it('the count reads it', async () => {
    expect(await sqlitePlan(db(), THROTTLE_COUNT)).toContain('USING INDEX idx_executions_throttle');
  });
});
