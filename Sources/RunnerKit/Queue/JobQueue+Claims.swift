import Foundation

/// Claims under a lease: the one statement that takes jobs (a fair share, their keys locked,
/// the hosts held back), and when the next lease of a job that may be claimed again ends.
extension JobQueue {
    /// `host ms host ms …` as the claim statement sums up the pauses.
    static func pauses(_ text: String?) -> [(host: String, left: Duration)] {
        guard let words = text?.split(separator: " "), words.count >= 2 else { return [] }
        return stride(from: 0, to: words.count - 1, by: 2).compactMap { index in
            Int(words[index + 1]).map { (String(words[index]), .milliseconds($0)) }
        }
    }

    /// Takes up to `limit` jobs for `runner`, in one statement: queued ones, and running ones
    /// whose lease ran out (their runner died) that were claimed fewer than `maxClaims` times,
    /// whose key no runner holds (a job of a running key waits for it, instead of ending
    /// `duplicate`; several jobs of one free key may come in one claim, the oldest to run).
    /// The keys of the jobs taken that no runner holds are locked for `runner` in the same
    /// statement (`QueueClaim.keyLocked`), so starting them costs no statement more; so do the hosts
    /// the fleet holds back now (`QueueClaim.pauses`).
    /// A running job whose record is stored and whose hooks were left pending by a runner that
    /// died is claimed as the others are, with its record (`QueueClaim.outcome`): its key is neither
    /// waited for nor locked, since only its hooks run.
    /// With `kinds`, only jobs of those kinds are taken (the kinds the runner has loaded). The
    /// test is written `array_position(…) IS NOT NULL`, not `kind = ANY(…)`: on a table whose
    /// statistics are not fresh, the planner takes `= ANY` to leave almost no row and sorts every
    /// waiting job for each claim (three times the database's CPU per job on 20 000 jobs), where
    /// this keeps the walk along the waiting jobs' index that stops at the limit. Likewise the
    /// jobs picked are updated by `id = ANY (ARRAY(…))`: with the fair share's limit a subquery,
    /// the planner takes the picked jobs for thousands and hashed the whole table (and the whole
    /// of `runner.results`) for each claim, a cost that grew with the queue.
    ///
    /// A fair share: when the fleet's live watchers (those that said how many slots they have,
    /// and could run a queued job: this one, or one that has the kind of one loaded) have more
    /// slots than there are jobs to run (queued, or running and not yet ended), a claim takes no
    /// more than its share, the jobs to run divided among those watchers (rounded up), less the
    /// jobs `runner` runs already. So two idle watchers given four long jobs run two each.
    package func claim(runner: String, limit: Int = 1, kinds: [String]? = nil) throws(QueueError) -> [QueueClaim] {
        let rows = try connection.query(
            """
            WITH \(Self.fairShare),
            picked AS (
                SELECT id FROM runner.jobs
                WHERE (state = 'queued' OR (state = 'running' AND lease_until < now() AND \(Self.claimable)))
                    \(kinds == nil ? "" : "AND array_position($5::text[], kind) IS NOT NULL")
                    AND (status IS NOT NULL OR NOT EXISTS (SELECT 1 FROM runner.keys k WHERE k.key = runner.jobs.key AND k.lease_until >= now()))
                ORDER BY id LIMIT (SELECT n FROM share) FOR UPDATE SKIP LOCKED),
            claimed AS (
                UPDATE runner.jobs j SET state = 'running', runner = $1,
                    claims = claims + CASE WHEN j.status IS NULL THEN 1 ELSE 0 END,
                    hook_claims = hook_claims + CASE WHEN j.status IS NULL THEN 0 ELSE 1 END,
                    lease_until = now() + $3::interval, started_at = CASE WHEN j.status IS NULL THEN now() ELSE j.started_at END
                WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
                RETURNING j.id, j.key, j.kind, j.job, j.file, CASE WHEN j.status IS NULL THEN NULL ELSE j.record END AS outcome, j.phase, j.batch),
            locked AS (
                INSERT INTO runner.keys AS k (key, runner, lease_until)
                SELECT DISTINCT key, $1, now() + $3::interval FROM claimed WHERE outcome IS NULL
                ON CONFLICT (key) DO UPDATE SET runner = EXCLUDED.runner, lease_until = EXCLUDED.lease_until
                WHERE k.lease_until < now()
                RETURNING key)
            SELECT c.id, c.key, c.kind, c.job, c.key IN (SELECT key FROM locked), c.file,
                (SELECT string_agg(h.host || ' ' || ceil(extract(epoch FROM h.paused_until - now()) * 1000)::bigint, ' ')
                 FROM runner.hosts h WHERE h.paused_until > now()),
                r.record, c.outcome, c.phase, c.batch
            FROM claimed c LEFT JOIN runner.results r ON r.key = c.key
            """, [runner, String(limit), leaseText, String(Self.maxClaims)] + (kinds.map { [Self.array($0)] } ?? []))
        let pauses = Self.pauses(rows.first.flatMap { $0.count > 6 ? $0[6] : nil })
        return rows.compactMap { row in
            guard let id = row[0].flatMap({ Int64($0) }), let key = row[1], let kind = row[2], let job = row[3] else { return nil }
            var claim = QueueClaim(id: id, key: key, kind: kind, job: job, keyLocked: row[4] == "t", file: row[5] ?? "", pauses: pauses)
            claim.previous = row.count > 7 ? row[7] : nil
            claim.outcome = row.count > 8 ? row[8] : nil
            claim.completesParent = row.count > 9 && row[9] == "complete"
            claim.batch = row.count > 10 ? row[10] : nil
            return claim
        }.sorted { $0.id < $1.id }
    }

    /// The part of the claim statement that says how many jobs it takes (`share`): `$2`, or
    /// less when the fleet has more slots than jobs to run (see `claim`). The jobs to run are
    /// counted only up to the fleet's slots, so a long queue costs no count of its own.
    static let fairShare = """
        fleet AS (
            SELECT count(*) AS watchers, coalesce(sum(w.slots), 0) AS slots FROM runner.watchers w
            WHERE w.slots IS NOT NULL
                AND (w.name = $1 OR (w.heartbeat_at > now() - make_interval(secs => w.lease_ms / 1000.0)
                    AND EXISTS (SELECT 1 FROM runner.jobs q WHERE q.state = 'queued' AND array_position(w.kinds, q.kind) IS NOT NULL)))),
        work AS (
            SELECT count(*) AS n FROM (
                SELECT 1 FROM runner.jobs WHERE state IN ('queued', 'running') AND status IS NULL LIMIT (SELECT slots FROM fleet)) t),
        share AS (
            SELECT CASE WHEN f.watchers > 1 AND w.n < f.slots
                THEN least($2::bigint, greatest(0, ceil(w.n::numeric / f.watchers)::bigint
                    - (SELECT count(*) FROM runner.jobs m WHERE m.state = 'running' AND m.runner = $1 AND m.status IS NULL AND m.lease_until >= now())))
                ELSE $2::bigint END AS n
            FROM fleet f, work w)
        """

    /// Whether a running job whose lease ran out may be claimed again (`$4`: `maxClaims`): a job
    /// abandoned fewer times than that (claims that made durable progress are credited back), or
    /// one whose hooks were left fewer times than that.
    static let claimable = "CASE WHEN status IS NULL THEN claims - credits < $4 ELSE hook_claims < $4 END"

    /// How long until the first lease of a running job ends (nil: none runs): a job whose
    /// runner died can be claimed then.
    package func nextLeaseEnd() throws(QueueError) -> Duration? {
        let rows = try connection.query(
            "SELECT extract(epoch FROM min(lease_until) - now())::float8 FROM runner.jobs WHERE state = 'running' AND "
                + Self.claimable.replacingOccurrences(of: "$4", with: "$1"),
            [String(Self.maxClaims)])
        return Self.value(rows).flatMap(Double.init).map { .seconds(max(0, $0)) }
    }
}
