import Foundation

/// The job queue in PostgreSQL that runners on many machines share: jobs submitted as rows,
/// claimed with `FOR UPDATE SKIP LOCKED` under a lease, their records written back.
///
/// Tables (schema `runner`, made on first use): `jobs` (one row a job: its key, kind, the job
/// itself, the batch it was submitted in, its parent, its state `queued`, `running`, `waiting`
/// (a parent, for its children) or `done`,
/// who runs it and until when its lease holds, how many times it was claimed, its record),
/// `keys` (the keys running now, one row each: one task per key across every runner), `hosts`
/// (each paced host's next request
/// slot and pause, taken atomically by every runner), `watchers` (each watcher of the fleet: its
/// name, host, version, kinds, lease and last heartbeat), `results` (each key's last record, as
/// its `results/` file says it: validators and payload path for whichever runner runs the key
/// next), `identity` (the queue's id, and the output folder its first watcher stamped),
/// `parents` (how many children each waiting parent has left), `meta` (the schema's version).
/// Channels: `runner_jobs` (jobs were queued), `runner_cancel` (a key to cancel), `runner_pause`
/// (a host asked to be left alone: milliseconds, the runner told, the host, a space between
/// each), `runner_events` (a job ended: JSON, while a watcher serving a live page is alive).
package final class JobQueue: Sendable {
    /// The schema this binary knows; a database with a newer one is refused.
    package static let schemaVersion = 1
    /// A job claimed this many times and abandoned (its runner died) ends failed.
    package static let maxClaims = 3

    /// What `runner --version` says of libpq.
    package static var libraryLine: String { PostgresLibrary.versionLine }

    package let connection: PostgresConnection
    /// How long a claim holds without being renewed.
    package let lease: Duration

    package init(url: String, lease: Duration = .seconds(30)) throws(QueueError) {
        connection = try PostgresConnection(url: url)
        self.lease = lease
        try prepare()
    }

    /// Connects on a thread of its own (libpq blocks), for callers on the concurrency pool.
    package static func connect(url: String, lease: Duration = .seconds(30)) async throws(QueueError) -> JobQueue {
        let thread = BlockingThread(name: "runner queue connect")
        defer { thread.stop() }
        return try await thread.run { () throws(QueueError) -> JobQueue in try JobQueue(url: url, lease: lease) }
    }

    private var leaseText: String { "\(max(1, lease.inMilliseconds)) milliseconds" }

    // MARK: - Schema

    private func prepare() throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            // Several runners starting at once: one makes the tables, the others wait for it.
            try db.query("SELECT pg_advisory_xact_lock(74170001)")
            // Made only when missing: a producer's role (`grant(producer:)`) may not create
            // anything, and PostgreSQL checks that right before it looks for the schema.
            let made = try db.query("SELECT to_regnamespace('runner') IS NOT NULL, to_regclass('runner.meta') IS NOT NULL").first ?? []
            if made.first != "t" { try db.query("CREATE SCHEMA IF NOT EXISTS runner") }
            if made.count < 2 || made[1] != "t" { try db.query("CREATE TABLE IF NOT EXISTS runner.meta (version integer NOT NULL)") }
            let version = Self.value(try db.query("SELECT max(version) FROM runner.meta")).flatMap { Int($0) }
            if let version, version > Self.schemaVersion {
                throw QueueError(
                    "the queue's tables are of version \(version), newer than this runner knows (\(Self.schemaVersion)); upgrade the runner",
                    usage: true)
            }
            if version == nil { try Self.makeTables(db) }
            try Self.addWhatVersionOneLacks(db)
        }
    }

    private static func makeTables(_ db: PostgresConnection) throws(QueueError) {
        try db.query("""
            CREATE TABLE runner.jobs (
                id bigserial PRIMARY KEY,
                key text NOT NULL,
                kind text NOT NULL,
                job text NOT NULL,
                file text NOT NULL,
                state text NOT NULL DEFAULT 'queued',
                claims integer NOT NULL DEFAULT 0,
                runner text,
                lease_until timestamptz,
                status text,
                reason text,
                record text,
                submitted_at timestamptz NOT NULL DEFAULT now(),
                started_at timestamptz,
                finished_at timestamptz)
            """)
        try db.query("CREATE INDEX jobs_waiting ON runner.jobs (id) WHERE state IN ('queued', 'running')")
        try db.query("CREATE INDEX jobs_key ON runner.jobs (key)")
        try db.query("CREATE INDEX jobs_leases ON runner.jobs (lease_until) WHERE state = 'running'")
        try db.query("CREATE TABLE runner.keys (key text PRIMARY KEY, runner text NOT NULL, lease_until timestamptz NOT NULL)")
        try db.query("""
            CREATE TABLE runner.hosts (
                host text PRIMARY KEY,
                next_at timestamptz NOT NULL DEFAULT now(),
                paused_until timestamptz NOT NULL DEFAULT '-infinity')
            """)
        try db.query("INSERT INTO runner.meta (version) VALUES ($1)", [String(Self.schemaVersion)])
    }

    /// The batch column and the watchers, results and identity tables, added to version 1
    /// without a new version (a runner that does not know them goes unlisted, its submits belong
    /// to no batch, its records stay out of `results`); made only when missing, so that a role
    /// that does not own the tables can use them once made.
    private static func addWhatVersionOneLacks(_ db: PostgresConnection) throws(QueueError) {
        let present = try db.query(
            """
            SELECT to_regclass('runner.watchers') IS NOT NULL,
                EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'runner.jobs'::regclass AND attname = 'batch' AND NOT attisdropped),
                to_regclass('runner.results') IS NOT NULL, to_regclass('runner.identity') IS NOT NULL,
                EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'runner.jobs'::regclass AND attname = 'parent_id' AND NOT attisdropped),
                EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('runner.watchers') AND attname = 'events' AND NOT attisdropped),
                EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'runner.jobs'::regclass AND attname = 'hook_claims' AND NOT attisdropped),
                EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('runner.watchers') AND attname = 'instance' AND NOT attisdropped),
                to_regclass('runner.bandwidth') IS NOT NULL
            """).first ?? []
        if present.count > 8 && present[8] != "t" {
            // `--limit-rate` and a host's `limitRate` for the fleet: a token bucket each (`''`
            // for all transfers, else the host), its bytes paid for until `paid_until`.
            try db.query("CREATE TABLE runner.bandwidth (name text PRIMARY KEY, paid_until timestamptz NOT NULL DEFAULT now())")
        }
        if present.count > 7 && present.first == "t" && present[7] != "t" {
            // Named watchers: which process holds a name (`instance`, `pid`), so that a second
            // live one is refused and a restarted one takes its own claims back; and how many
            // jobs each runs at once (`slots`), for the fair share of a claim.
            try db.query("ALTER TABLE runner.watchers ADD COLUMN instance text, ADD COLUMN pid integer, ADD COLUMN slots integer")
        }
        if present.count > 6 && present[6] != "t" {
            // Abandons counted as the rule says: a claim made only to run hooks counts apart
            // (`hook_claims`), and a claim during which the job made durable progress is
            // credited back (`credits`, once per claim: `credited_claim`). Hooks that could not
            // run after as many claims of their own end with `hooks_failed` saying so.
            try db.query("""
                ALTER TABLE runner.jobs ADD COLUMN hook_claims integer NOT NULL DEFAULT 0,
                    ADD COLUMN credits integer NOT NULL DEFAULT 0, ADD COLUMN credited_claim integer NOT NULL DEFAULT 0,
                    ADD COLUMN hooks_failed text
                """)
        }
        if present.count > 5 && present.first == "t" && present[5] != "t" {
            // Watchers that serve a live page follow the fleet's events (`runner_events`).
            try db.query("ALTER TABLE runner.watchers ADD COLUMN events boolean NOT NULL DEFAULT false")
        }
        if present.count > 4 && present[4] != "t" {
            // A parent's children are queue jobs: the parent waits for them (`phase`). How many
            // are left is counted in a narrow table of its own (one small row a parent, updated
            // as children end), not in the parent's wide row.
            try db.query("""
                ALTER TABLE runner.jobs ADD COLUMN parent_id bigint, ADD COLUMN phase text,
                    ADD COLUMN children_total integer, ADD COLUMN children_invalid integer, ADD COLUMN first_invalid text
                """)
            try db.query("CREATE INDEX jobs_parent ON runner.jobs (parent_id) WHERE parent_id IS NOT NULL")
            try db.query("CREATE TABLE runner.parents (id bigint PRIMARY KEY, children_left integer NOT NULL)")
        }
        if present.count > 2 && present[2] != "t" {
            try db.query("CREATE TABLE runner.results (key text PRIMARY KEY, record text NOT NULL, finished_at timestamptz NOT NULL DEFAULT now())")
        }
        if present.count > 3 && present[3] != "t" {
            try db.query("""
                CREATE TABLE runner.identity (
                    id text NOT NULL, folder text, output text, stamped_by text, stamped_at timestamptz)
                """)
            try db.query("INSERT INTO runner.identity (id) VALUES (gen_random_uuid()::text)")
        }
        if present.count > 1 && present[1] != "t" {
            try db.query("ALTER TABLE runner.jobs ADD COLUMN batch text")
            try db.query("CREATE INDEX jobs_batch ON runner.jobs (batch)")
        }
        if present.first != "t" {
            try db.query("""
                CREATE TABLE runner.watchers (
                    name text PRIMARY KEY,
                    host text NOT NULL,
                    version text NOT NULL,
                    kinds text[] NOT NULL,
                    lease_ms bigint NOT NULL,
                    started_at timestamptz NOT NULL DEFAULT now(),
                    heartbeat_at timestamptz NOT NULL DEFAULT now(),
                    events boolean NOT NULL DEFAULT false,
                    instance text, pid integer, slots integer)
                """)
        }
    }

    // MARK: - Producers

    /// Gives the existing PostgreSQL role `role` what `submit`, `submit --wait` and `status`
    /// need, and nothing more: it may read the queue's tables and insert jobs (key, kind, job,
    /// file and batch only), never update or delete a row, nor insert one with a state, status,
    /// record, claims or hooks of its own. So only a watcher, holding the claim, ends a job.
    /// Run by a role that owns the tables (the watchers'); the tables are made first if missing.
    package func grant(producer role: String) throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            let exists = Self.value(try db.query("SELECT count(*) FROM pg_roles WHERE rolname = $1", [role]))
            guard exists == "1" else { throw QueueError("there is no role \(Printable.escaped(role)) in the database; create it first (CREATE ROLE … LOGIN)", usage: true) }
            let name = Self.value(try db.query("SELECT quote_ident($1)", [role])) ?? role
            let tables = try db.query(
                "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'runner' ORDER BY 1"
            ).compactMap { $0[0] }.map { "runner." + $0 }
            try db.query("REVOKE ALL ON ALL TABLES IN SCHEMA runner FROM \(name)")
            try db.query("REVOKE ALL ON ALL SEQUENCES IN SCHEMA runner FROM \(name)")
            try db.query("GRANT USAGE ON SCHEMA runner TO \(name)")
            try db.query("GRANT SELECT ON \(tables.joined(separator: ", ")) TO \(name)")
            try db.query("GRANT INSERT (key, kind, job, file, batch) ON runner.jobs TO \(name)")
            try db.query("GRANT USAGE ON SEQUENCE runner.jobs_id_seq TO \(name)")
        }
    }

    // MARK: - Submitting

    /// A new batch's id: when it was made and a random part, `20261126-041503-8f3a`.
    package static func newBatchID(now: Date = Date()) -> String {
        var time = time_t(now.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(
            format: "%04d%02d%02d-%02d%02d%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        return stamp + "-" + String(format: "%04x", UInt16.random(in: 0...UInt16.max))
    }

    /// Inserts every job in one transaction, or none, as one batch, and wakes the idle runners.
    /// A unique job whose key is queued or running (or came earlier in the same submit) is not
    /// inserted; the answer names them, and the jobs that hold their keys.
    @discardableResult
    package func submit(_ jobs: [QueueSubmission], batch: String? = nil) throws(QueueError) -> QueueSubmitted {
        var seen = Set<String>()
        var inserted: [QueueSubmission] = []
        var outcome = QueueSubmitted()
        for job in jobs {
            if job.unique && seen.contains(job.key) {
                outcome.leftOut.append(job)
                continue
            }
            seen.insert(job.key)
            inserted.append(job)
        }
        return try connection.transaction { db throws(QueueError) -> QueueSubmitted in
            // Two submits of one unique key at once: one inserts it, the other sees it.
            if inserted.contains(where: \.unique) { try db.query("SELECT pg_advisory_xact_lock(74170002)") }
            var start = 0
            while start < inserted.count {
                let chunk = inserted[start..<min(inserted.count, start + 1000)]
                let refused = try db.query(
                    """
                    WITH given AS (
                        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $6::bool[])
                            WITH ORDINALITY AS g(key, kind, job, file, uniq, ordinality)),
                    put AS (
                        INSERT INTO runner.jobs (key, kind, job, file, batch)
                        SELECT key, kind, job, file, $5 FROM given
                        WHERE NOT (uniq AND EXISTS (SELECT 1 FROM runner.jobs j WHERE j.key = given.key AND j.state IN ('queued', 'running', 'waiting')))
                        RETURNING 1)
                    SELECT ordinality - 1 FROM given
                    WHERE uniq AND EXISTS (SELECT 1 FROM runner.jobs j WHERE j.key = given.key AND j.state IN ('queued', 'running', 'waiting'))
                    """,
                    [Self.array(chunk.map(\.key)), Self.array(chunk.map(\.kind)), Self.array(chunk.map(\.job)), Self.array(chunk.map(\.file)),
                     batch, "{" + chunk.map { $0.unique ? "t" : "f" }.joined(separator: ",") + "}"])
                let indices = refused.compactMap { $0[0].flatMap { Int($0) } }
                outcome.leftOut += indices.map { chunk[chunk.startIndex + $0] }
                start += chunk.count
            }
            if inserted.count >= Self.analyzeAfter {
                // Fresh statistics before the claims start: on a table whose statistics still
                // say it is nearly empty, the planner sorts every waiting job for each claim
                // (the database's CPU per job three to five times), where it should walk the
                // waiting jobs' index and stop at the claim's limit. Autovacuum would get there
                // a minute later. A submitter that does not own the table skips it, silently.
                // (A parent's many children, queued by `finish`, get the same.)
                try db.query("SET LOCAL client_min_messages = error")
                try db.query("ANALYZE runner.jobs")
            }
            if !outcome.leftOut.isEmpty {
                let keys = Set(outcome.leftOut.map(\.key)).sorted()
                let batchClause = batch == nil ? "" : " AND batch IS DISTINCT FROM $2"
                outcome.holding = try db.query(
                    "SELECT id FROM runner.jobs WHERE key = ANY($1::text[]) AND state IN ('queued', 'running', 'waiting')" + batchClause,
                    batch == nil ? [Self.array(keys)] : [Self.array(keys), batch]
                ).compactMap { $0[0] }
            }
            outcome.inserted = jobs.count - outcome.leftOut.count
            try db.query("SELECT pg_notify('runner_jobs', '')")
            return outcome
        }
    }

    /// A submit of this many jobs or more brings the queue's statistics up to date.
    static let analyzeAfter = 1000

    /// The jobs of `batch` (none: no such batch).
    package func batchStatus(_ batch: String) throws(QueueError) -> QueueBatchStatus {
        var status = QueueBatchStatus()
        for row in try connection.query(
            """
            SELECT state, coalesce(status, ''), parent_id IS NULL, count(*), coalesce(sum(children_invalid), 0)
            FROM runner.jobs WHERE batch = $1 GROUP BY 1, 2, 3
            """, [batch])
        {
            let count = Int(row[3] ?? "0") ?? 0
            switch row[0] {
            case "queued": status.queued += count
            case "running", "waiting": status.running += count
            default:
                status.ended[row[1] ?? "", default: 0] += count
                if row[2] == "t" { status.topLevel[row[1] ?? "", default: 0] += count }
                status.invalidChildren += Int(row[4] ?? "0") ?? 0
            }
        }
        return status
    }

    /// The ended top-level jobs of `batch` that did not succeed (nor were not modified), as
    /// `run`'s table shows them: key, status and why; at most `limit`, oldest end first, and how
    /// many there are in all.
    package func batchFailures(_ batch: String, limit: Int) throws(QueueError) -> (failures: [(key: String, status: String, error: String)], total: Int) {
        let rows = try connection.query(
            """
            SELECT key, status, coalesce(reason, ''), count(*) OVER ()
            FROM runner.jobs
            WHERE batch = $1 AND parent_id IS NULL AND state = 'done' AND status NOT IN ('succeeded', 'notModified')
            ORDER BY finished_at, id LIMIT $2
            """, [batch, String(limit)])
        let total = rows.first.flatMap { Int($0[3] ?? "0") } ?? 0
        return (rows.map { ($0[0] ?? "", $0[1] ?? "", $0[2] ?? "") }, total)
    }

    /// How many of the jobs `ids` are still queued or running, and how the others ended.
    package func jobsStatus(_ ids: [String]) throws(QueueError) -> (pending: Int, ended: [String: Int]) {
        guard !ids.isEmpty else { return (0, [:]) }
        var pending = 0
        var ended: [String: Int] = [:]
        for row in try connection.query(
            "SELECT state, coalesce(status, ''), count(*) FROM runner.jobs WHERE id = ANY($1::bigint[]) GROUP BY 1, 2", [Self.array(ids)])
        {
            let count = Int(row[2] ?? "0") ?? 0
            if row[0] == "done" { ended[row[1] ?? "", default: 0] += count } else { pending += count }
        }
        return (pending, ended)
    }

    /// A text array literal: every element quoted, `"` and `\` escaped; nil is NULL.
    static func array(_ values: [String?]) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            guard let value else {
                bytes.append(contentsOf: "NULL".utf8)
                continue
            }
            bytes.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A bigint array literal.
    static func array(_ ids: [Int64]) -> String { "{" + ids.map(String.init).joined(separator: ",") + "}" }

    /// The first column of the first row (nil: no row, or NULL).
    static func value(_ rows: [[String?]]) -> String? { rows.first?.first ?? nil }

    // MARK: - Claiming

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
    /// this keeps the walk along the waiting jobs' index that stops at the limit.
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
                FROM picked WHERE j.id = picked.id
                RETURNING j.id, j.key, j.kind, j.job, j.file, CASE WHEN j.status IS NULL THEN NULL ELSE j.record END AS outcome, j.phase),
            locked AS (
                INSERT INTO runner.keys AS k (key, runner, lease_until)
                SELECT DISTINCT key, $1, now() + $3::interval FROM claimed WHERE outcome IS NULL
                ON CONFLICT (key) DO UPDATE SET runner = EXCLUDED.runner, lease_until = EXCLUDED.lease_until
                WHERE k.lease_until < now()
                RETURNING key)
            SELECT c.id, c.key, c.kind, c.job, c.key IN (SELECT key FROM locked), c.file,
                (SELECT string_agg(h.host || ' ' || ceil(extract(epoch FROM h.paused_until - now()) * 1000)::bigint, ' ')
                 FROM runner.hosts h WHERE h.paused_until > now()),
                r.record, c.outcome, c.phase
            FROM claimed c LEFT JOIN runner.results r ON r.key = c.key
            """, [runner, String(limit), leaseText, String(Self.maxClaims)] + (kinds.map { [Self.array($0)] } ?? []))
        let pauses = Self.pauses(rows.first.flatMap { $0.count > 6 ? $0[6] : nil })
        return rows.compactMap { row in
            guard let id = row[0].flatMap({ Int64($0) }), let key = row[1], let kind = row[2], let job = row[3] else { return nil }
            var claim = QueueClaim(id: id, key: key, kind: kind, job: job, keyLocked: row[4] == "t", file: row[5] ?? "", pauses: pauses)
            claim.previous = row.count > 7 ? row[7] : nil
            claim.outcome = row.count > 8 ? row[8] : nil
            claim.completesParent = row.count > 9 && row[9] == "complete"
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

    /// Ends the jobs abandoned `maxClaims` times whose last runner died too (their lease ran
    /// out), so that a job that crashes runners does not loop for ever: a job that had not
    /// ended ends `failed` ("abandoned by 3 runners"; claims during which it made durable
    /// progress do not count); a job that had ended, and whose hooks its runners left as many
    /// times, keeps its own status and ends with its hooks failed, said in `hooks_failed`.
    @discardableResult
    package func failAbandoned() throws(QueueError) -> QueueAbandoned {
        let rows = try connection.query(
            """
            WITH gone AS (
                UPDATE runner.jobs SET state = 'done', lease_until = NULL,
                    status = coalesce(status, 'failed'), finished_at = coalesce(finished_at, now()),
                    reason = CASE WHEN status IS NULL THEN 'abandoned by ' || claims - credits || ' runners' ELSE reason END,
                    hooks_failed = CASE WHEN status IS NULL THEN hooks_failed
                        ELSE 'its --on-finish hooks were left by ' || hook_claims || ' runners (each stopped while running them); they did not run' END,
                    record = CASE WHEN status IS NULL THEN json_build_object('key', key, 'kind', kind, 'status', 'failed',
                        'error', 'abandoned by ' || claims - credits || ' runners (each stopped while running it)')::text ELSE record END
                WHERE state = 'running' AND lease_until < now() AND NOT (\(Self.claimable.replacingOccurrences(of: "$4", with: "$1")))
                RETURNING key, record, hooks_failed)
            SELECT * FROM gone
            """, [String(Self.maxClaims)])
        var abandoned = QueueAbandoned()
        for row in rows {
            if let hooks = row[2] {
                abandoned.hooksFailed.append((row[0] ?? "", row[1] ?? "", hooks))
            } else {
                abandoned.failed += 1
            }
        }
        return abandoned
    }

    /// Credits the running jobs `ids` of `runner` with one claim each: their claim made durable
    /// progress (a partial grew and was synced), so it will not count as an abandon if the
    /// runner dies. Once per claim.
    package func credit(ids: [Int64], runner: String) throws(QueueError) {
        guard !ids.isEmpty else { return }
        try connection.query(
            """
            UPDATE runner.jobs SET credits = credits + 1, credited_claim = claims
            WHERE id = ANY($1::bigint[]) AND runner = $2 AND state = 'running' AND status IS NULL AND credited_claim <> claims
            """, [Self.array(ids), runner])
    }

    /// How long until the first lease of a running job ends (nil: none runs): a job whose
    /// runner died can be claimed then.
    package func nextLeaseEnd() throws(QueueError) -> Duration? {
        let rows = try connection.query(
            "SELECT extract(epoch FROM min(lease_until) - now())::float8 FROM runner.jobs WHERE state = 'running' AND "
                + Self.claimable.replacingOccurrences(of: "$4", with: "$1"),
            [String(Self.maxClaims)])
        return Self.value(rows).flatMap(Double.init).map { .seconds(max(0, $0)) }
    }

    /// Stores the records of finished jobs and ends their claims (those `runner` still holds),
    /// and lets go of `keys` of `runner`, in one statement; when a queued job waits for one of
    /// those keys, the runners are told as of new jobs.
    /// Returns the parents whose last child ended with these: each is now this runner's to
    /// complete (`completeParent`). A job with children waits for them; its children are
    /// queued in the same statement (and the runners told).
    @discardableResult
    package func finish(_ jobs: [QueueFinish], runner: String, unlocking keys: [String] = []) throws(QueueError) -> [Int64] {
        guard !jobs.isEmpty else {
            try unlockKeys(keys, runner: runner)
            return []
        }
        var children: [(key: String, kind: String, job: String, parent: Int64)] = []
        for job in jobs { children += job.children.jobs.map { ($0.key, $0.kind, $0.job, job.id) } }
        let rows = try connection.query(
            """
            WITH unlocked AS (DELETE FROM runner.keys WHERE key = ANY($6::text[]) AND runner = $5 RETURNING key),
            done AS (
                UPDATE runner.jobs j SET status = f.status, reason = f.reason, record = f.record, finished_at = now(),
                    state = CASE WHEN f.waits > 0 THEN 'waiting' WHEN f.pending THEN 'running' ELSE 'done' END,
                    lease_until = CASE WHEN f.pending AND f.waits = 0 THEN now() + $9::interval END,
                    runner = CASE WHEN f.waits > 0 THEN NULL ELSE j.runner END,
                    phase = CASE WHEN f.waits > 0 THEN 'children' END,
                    children_total = CASE WHEN f.waits > 0 THEN f.waits + f.invalid END,
                    children_invalid = CASE WHEN f.waits > 0 THEN f.invalid END, first_invalid = CASE WHEN f.waits > 0 THEN f.first_invalid END
                FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $7::bool[], $8::bool[], $10::int[], $11::int[], $12::text[])
                    AS f(id, status, reason, record, kept, pending, waits, invalid, first_invalid)
                WHERE j.id = f.id AND j.runner = $5 AND j.state = 'running' AND j.status IS NULL
                RETURNING j.key, f.record, f.kept AND f.waits = 0 AS kept, j.id, j.parent_id, j.file, j.batch, f.waits, j.kind, j.status),
            kept AS (
                INSERT INTO runner.results AS r (key, record)
                SELECT DISTINCT ON (key) key, record FROM done WHERE kept ORDER BY key, id DESC
                ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record, finished_at = now()),
            counting AS (INSERT INTO runner.parents (id, children_left) SELECT id, waits FROM done WHERE waits > 0),
            children AS (
                INSERT INTO runner.jobs (key, kind, job, file, batch, parent_id)
                SELECT c.key, c.kind, c.job, d.file, d.batch, c.parent
                FROM unnest($13::text[], $14::text[], $15::text[], $16::bigint[]) AS c(key, kind, job, parent)
                JOIN done d ON d.id = c.parent
                RETURNING 1),
            \(Self.parentsOfDone(runner: "$5", lease: "$9")),
            \(Self.toldTheFleet(runner: "$5"))
            SELECT (SELECT count(*) FROM woken) + (SELECT count(*) FROM told), (SELECT count(*) FROM children),
                (SELECT string_agg(id::text, ' ') FROM completing)
            """,
            [Self.array(jobs.map(\.id)), Self.array(jobs.map(\.status)),
             Self.array(jobs.map(\.error)), Self.array(jobs.map(\.record)), runner, Self.array(keys),
             Self.flags(jobs.map { $0.isKeyRecord && $0.status != JobStatus.duplicate.rawValue }), Self.flags(jobs.map(\.hooksPending)),
             leaseText, Self.numbers(jobs.map(\.children.jobs.count)), Self.numbers(jobs.map(\.children.invalid)),
             Self.array(jobs.map(\.children.firstInvalid)),
             Self.array(children.map(\.key)), Self.array(children.map(\.kind)), Self.array(children.map(\.job)), Self.array(children.map(\.parent))])
        if children.count >= Self.analyzeAfter { try refreshStatistics() }
        return Self.ids(rows.first.flatMap { $0.count > 2 ? $0[2] : nil })
    }

    /// Brings the planner's statistics of the jobs up to date after many rows came at once (a
    /// submit, a parent's children), as `submit` explains; quietly skipped by a role that does
    /// not own the table.
    private func refreshStatistics() throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            try db.query("SET LOCAL client_min_messages = error")
            try db.query("ANALYZE runner.jobs")
        }
    }

    /// The end of a statement whose `done` ended jobs (`parent_id` among what it returns) and
    /// whose `unlocked` let go of keys: each parent counts its children that ended (`runner.parents`); one whose
    /// last child ended is claimed by `runner` under the lease (parameters) to complete its record
    /// (`phase` `complete`); `woken` tells the runners when a queued job waits for a key let go of.
    static func parentsOfDone(runner: String, lease: String) -> String {
        """
        counted AS (
            UPDATE runner.parents p SET children_left = p.children_left - d.n
            FROM (SELECT parent_id, count(*) AS n FROM done WHERE parent_id IS NOT NULL AND waits = 0 GROUP BY parent_id) d
            WHERE p.id = d.parent_id
            RETURNING p.id, p.children_left),
        completing AS (
            UPDATE runner.jobs j SET state = 'running', phase = 'complete', runner = \(runner), lease_until = now() + \(lease)::interval
            FROM counted c WHERE j.id = c.id AND c.children_left = 0 AND j.state = 'waiting'
            RETURNING j.id),
        woken AS (
            SELECT pg_notify('runner_jobs', '')
            WHERE EXISTS (SELECT 1 FROM runner.jobs q WHERE q.key IN (SELECT key FROM unlocked) AND q.state = 'queued')
                OR EXISTS (SELECT 1 FROM done WHERE waits > 0))
        """
    }

    /// The end of a statement whose `done` ended jobs (`key`, `kind`, `status`; a parent that
    /// now waits for its children, `waits` > 0, has not): each is told
    /// on `runner_events` (what a live page's event stream shows of the fleet), when a watcher
    /// that follows them is alive.
    static func toldTheFleet(runner: String) -> String {
        """
        told AS (
            SELECT pg_notify('runner_events', json_build_object(
                'event', 'finished', 'key', d.key, 'kind', d.kind, 'status', d.status, 'runner', \(runner))::text)
            FROM done d
            WHERE d.waits = 0 AND EXISTS (SELECT 1 FROM runner.watchers w WHERE w.events AND w.heartbeat_at > now() - make_interval(secs => w.lease_ms / 1000.0)))
        """
    }

    /// Ids from `id id …` (nil: none).
    static func ids(_ text: String?) -> [Int64] {
        (text ?? "").split(separator: " ").compactMap { Int64($0) }
    }

    /// An int array literal.
    static func numbers(_ values: [Int]) -> String { "{" + values.map(String.init).joined(separator: ",") + "}" }

    /// A bool array literal.
    static func flags(_ values: [Bool]) -> String { "{" + values.map { $0 ? "t" : "f" }.joined(separator: ",") + "}" }

    /// How the jobs of the submitted file of job `id` (its file in its batch, children
    /// included) ended, by status, once none is left to run (queued, running its own job, or a
    /// parent waiting for its children); nil while some are.
    package func fileOutcome(of id: Int64) throws(QueueError) -> [String: Int]? {
        let rows = try connection.query(
            """
            WITH f AS (SELECT file, batch FROM runner.jobs WHERE id = $1)
            SELECT CASE WHEN j.state = 'queued' OR j.state = 'waiting' OR (j.state = 'running' AND j.status IS NULL) THEN '' ELSE j.status END,
                count(*)
            FROM runner.jobs j, f WHERE j.file = f.file AND j.batch IS NOT DISTINCT FROM f.batch GROUP BY 1
            """, [String(id)])
        var counts: [String: Int] = [:]
        for row in rows {
            let status = row[0] ?? ""
            if status.isEmpty { return nil }
            counts[status, default: 0] += Int(row[1] ?? "0") ?? 0
        }
        return counts
    }

    /// Ends the jobs whose records `finish` stored with their hooks pending, once the hooks ran
    /// (those `runner` still holds).
    package func hooksEnded(ids: [Int64], runner: String) throws(QueueError) {
        guard !ids.isEmpty else { return }
        try connection.query(
            """
            UPDATE runner.jobs SET state = 'done', lease_until = NULL
            WHERE id = ANY($1::bigint[]) AND runner = $2 AND state = 'running' AND status IS NOT NULL
            """, [Self.array(ids), runner])
    }

    /// Gives claims back at once (a runner stopping before it started them).
    package func release(ids: [Int64], runner: String) throws(QueueError) {
        guard !ids.isEmpty else { return }
        try connection.query(
            """
            UPDATE runner.jobs SET state = 'queued', runner = NULL, lease_until = NULL, started_at = NULL, claims = greatest(0, claims - 1)
            WHERE id = ANY($1::bigint[]) AND runner = $2 AND state = 'running' AND status IS NULL
            """, [Self.array(ids), runner])
        try connection.query("SELECT pg_notify('runner_jobs', '')")
    }

    /// Extends the leases of `runner`'s claims and keys, and says it is alive.
    package func renew(runner: String) throws(QueueError) {
        try connection.query(
            "UPDATE runner.jobs SET lease_until = now() + $2::interval WHERE runner = $1 AND state = 'running'", [runner, leaseText])
        try connection.query("UPDATE runner.keys SET lease_until = now() + $2::interval WHERE runner = $1", [runner, leaseText])
        try connection.query("UPDATE runner.watchers SET heartbeat_at = now() WHERE name = $1", [runner])
    }

    // MARK: - Watchers

    /// Lists `watcher` in the fleet under its name; rows of watchers silent for a day go.
    /// A name is one live watcher's: when another process holds it and is alive (its heartbeat
    /// within its lease), the watcher is refused (a usage error). When the process that held it
    /// is dead (silent past its lease, or on this host and gone), the name is taken over and the
    /// jobs that process still held under a lease are made claimable at once (their keys let
    /// go of), so a watcher restarted under its name takes its own abandoned claims back without
    /// waiting out their leases. Registering again from the same process only updates the row.
    package func register(_ watcher: QueueWatcher) throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            try db.query("SELECT pg_advisory_xact_lock(74170003, hashtext($1))", [watcher.name])
            try db.query("DELETE FROM runner.watchers WHERE heartbeat_at < now() - interval '1 day'")
            let previous = try db.query(
                """
                SELECT host, coalesce(pid, 0), coalesce(instance, ''), heartbeat_at > now() - make_interval(secs => lease_ms / 1000.0),
                    (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint
                FROM runner.watchers WHERE name = $1
                """, [watcher.name]).first
            if let previous, previous.count > 4, previous[2] != watcher.instance {
                let host = previous[0] ?? ""
                let pid = Int32(previous[1] ?? "0") ?? 0
                if previous[3] == "t" && !Self.isGone(host: host, pid: pid, seenFrom: watcher) {
                    let silent = Double(previous[4] ?? "0").map { String(format: "%.0f", $0 / 1000) } ?? "?"
                    throw QueueError(
                        "a watcher named \(Printable.escaped(watcher.name)) is alive (on \(Printable.escaped(host)), heartbeat \(silent) s ago); give this one another --name",
                        usage: true)
                }
                // The process that held the name is dead: what it held comes back now.
                let taken = try db.query(
                    """
                    WITH mine AS (
                        UPDATE runner.jobs SET lease_until = now() - interval '1 millisecond'
                        WHERE runner = $1 AND state = 'running' AND lease_until >= now() RETURNING 1),
                    keys AS (DELETE FROM runner.keys WHERE runner = $1 RETURNING 1)
                    SELECT (SELECT count(*) FROM mine)
                    """, [watcher.name])
                if Self.value(taken) != "0" { try db.query("SELECT pg_notify('runner_jobs', '')") }
            }
            try db.query(
                """
                INSERT INTO runner.watchers (name, host, version, kinds, lease_ms, events, instance, pid, slots)
                VALUES ($1, $2, $3, $4::text[], $5, $6, $7, $8, $9)
                ON CONFLICT (name) DO UPDATE SET host = EXCLUDED.host, version = EXCLUDED.version, kinds = EXCLUDED.kinds,
                    lease_ms = EXCLUDED.lease_ms, events = EXCLUDED.events, instance = EXCLUDED.instance, pid = EXCLUDED.pid,
                    slots = EXCLUDED.slots, heartbeat_at = now(),
                    started_at = CASE WHEN runner.watchers.instance IS DISTINCT FROM EXCLUDED.instance THEN now() ELSE runner.watchers.started_at END
                """, [watcher.name, watcher.host, watcher.version, Self.array(watcher.kinds), String(watcher.lease.inMilliseconds),
                      watcher.followsEvents ? "t" : "f", watcher.instance, String(watcher.pid), watcher.slots.map(String.init)])
        }
    }

    /// Whether the process `pid` on `host`, which held a watcher's name, is known to be gone as
    /// seen from `watcher`: on the same host, it is this very process id (a container restarted)
    /// or no process has that id.
    static func isGone(host: String, pid: Int32, seenFrom watcher: QueueWatcher) -> Bool {
        guard host == watcher.host, pid > 0 else { return false }
        if pid == watcher.pid { return true }
        return kill(pid, 0) != 0 && errno == ESRCH
    }

    /// Takes `runner` off the list (it stopped).
    package func unregister(runner: String) throws(QueueError) {
        try connection.query("DELETE FROM runner.watchers WHERE name = $1", [runner])
    }

    // MARK: - Keys

    /// Takes `key` for `runner` unless another runner holds it under a live lease.
    package func lockKey(_ key: String, runner: String) throws(QueueError) -> Bool {
        let rows = try connection.query(
            """
            INSERT INTO runner.keys (key, runner, lease_until) VALUES ($1, $2, now() + $3::interval)
            ON CONFLICT (key) DO UPDATE SET runner = EXCLUDED.runner, lease_until = EXCLUDED.lease_until
            WHERE runner.keys.lease_until < now()
            RETURNING key
            """, [key, runner, leaseText])
        return !rows.isEmpty
    }

    /// Lets go of `keys` of `runner` (those another runner took meanwhile stay); when a queued
    /// job waits for one of them, the runners are told as of new jobs.
    package func unlockKeys(_ keys: [String], runner: String) throws(QueueError) {
        guard !keys.isEmpty else { return }
        try connection.query(
            """
            WITH unlocked AS (DELETE FROM runner.keys WHERE key = ANY($1::text[]) AND runner = $2 RETURNING key)
            \(Self.wakeWaiting)
            """, [Self.array(keys), runner])
    }

    /// The end of a statement whose `unlocked` lets go of keys: a notice of new jobs when a
    /// queued job waits for one of them (the claims pass over held keys).
    private static let wakeWaiting = """
        SELECT pg_notify('runner_jobs', '')
        WHERE EXISTS (SELECT 1 FROM runner.jobs q WHERE q.key IN (SELECT key FROM unlocked) AND q.state = 'queued')
        """

    // MARK: - Pacing

    /// Takes `host`'s next request slot for the fleet, `interval` after the previous one and
    /// not before its pause ends; returns how long from now until it.
    package func reservePace(host: String, interval: Duration) throws(QueueError) -> Duration {
        let step = "\(max(1, Int(interval / .microseconds(1)))) microseconds"
        let rows = try connection.query(
            """
            INSERT INTO runner.hosts AS h (host, next_at) VALUES ($1, now() + $2::interval)
            ON CONFLICT (host) DO UPDATE SET next_at = greatest(h.next_at, now(), h.paused_until) + $2::interval
            RETURNING extract(epoch FROM h.next_at - now())::float8
            """, [host, step])
        let ahead = Self.value(rows).flatMap(Double.init) ?? 0
        return max(.zero, .seconds(ahead) - interval)
    }

    /// Reserves `bytes` of the fleet's bandwidth `name` (`""`: every transfer, else a host) at
    /// `rate` bytes a second: they are paid for after those reserved before them (or from now,
    /// less a tenth of a second of burst, when the bucket is idle). Returns how long from now
    /// until the end of their slot; they may be spent from `bytes / rate` before it.
    package func reserveBandwidth(_ name: String, bytes: Int, rate: Int) throws(QueueError) -> Duration {
        let cost = "\(max(1, Int64(bytes) * 1_000_000 / Int64(max(1, rate)))) microseconds"
        let rows = try connection.query(
            """
            INSERT INTO runner.bandwidth AS b (name, paid_until) VALUES ($1, now() - interval '100 milliseconds' + $2::interval)
            ON CONFLICT (name) DO UPDATE SET paid_until = greatest(b.paid_until, now() - interval '100 milliseconds') + $2::interval
            RETURNING extract(epoch FROM b.paid_until - now())::float8
            """, [name, cost])
        return .seconds(Self.value(rows).flatMap(Double.init) ?? 0)
    }

    /// Holds `host` back for every runner for `duration` from now (never shortening a pause),
    /// and tells the runners at once (`runner`, the one that was asked, is named in the notice).
    package func pause(host: String, for duration: Duration, from runner: String) throws(QueueError) {
        let milliseconds = max(1, duration.inMilliseconds)
        try connection.query(
            """
            INSERT INTO runner.hosts AS h (host, paused_until) VALUES ($1, now() + $2::interval)
            ON CONFLICT (host) DO UPDATE SET paused_until = greatest(h.paused_until, EXCLUDED.paused_until)
            """, [host, "\(milliseconds) milliseconds"])
        try connection.query("SELECT pg_notify('runner_pause', $1)", ["\(milliseconds) \(runner) \(host)"])
    }

    // MARK: - Pruning

    /// Deletes the rows of jobs that finished more than `age` ago; returns how many.
    @discardableResult
    package func prune(olderThan age: Duration) throws(QueueError) -> Int {
        let rows = try connection.query(
            "WITH gone AS (DELETE FROM runner.jobs WHERE state = 'done' AND finished_at < now() - $1::interval RETURNING 1) SELECT count(*) FROM gone",
            ["\(max(0, age.inMilliseconds)) milliseconds"])
        return Self.value(rows).flatMap { Int($0) } ?? 0
    }

    // MARK: - Cancelling

    /// Cancels the queued jobs of `key` and asks every runner to cancel its running task.
    /// Returns how many were queued, and the runners that run the key now.
    package func cancel(key: String) throws(QueueError) -> (queued: Int, running: [String]) {
        try connection.transaction { db throws(QueueError) in
            let queued = try db.query(
                """
                UPDATE runner.jobs SET state = 'done', status = 'cancelled', reason = 'cancelled (runner cancel)', finished_at = now(),
                    record = json_build_object('key', key, 'kind', kind, 'status', 'cancelled', 'error', 'cancelled (runner cancel)')::text
                WHERE key = $1 AND state = 'queued' RETURNING id
                """, [key]).count
            let running = try db.query("SELECT DISTINCT runner FROM runner.jobs WHERE key = $1 AND state = 'running'", [key])
                .compactMap { $0[0] }
            try db.query("SELECT pg_notify('runner_cancel', $1)", [key])
            // A parent waiting for its children: the queued ones are cancelled (counted off, so
            // the parent completes once the running ones ended), the running ones asked to stop.
            let children = try db.query(
                """
                WITH waiting_parents AS (SELECT id FROM runner.jobs WHERE key = $1 AND state = 'waiting'),
                gone AS (
                    UPDATE runner.jobs c SET state = 'done', status = 'cancelled', reason = 'cancelled with its parent (runner cancel)',
                        finished_at = now(),
                        record = json_build_object('key', key, 'kind', kind, 'status', 'cancelled', 'error', 'cancelled with its parent (runner cancel)')::text
                    WHERE c.parent_id IN (SELECT id FROM waiting_parents) AND c.state = 'queued'
                    RETURNING c.parent_id),
                counted AS (
                    UPDATE runner.parents p SET children_left = p.children_left - g.n
                    FROM (SELECT parent_id, count(*) AS n FROM gone GROUP BY parent_id) g
                    WHERE p.id = g.parent_id
                    RETURNING p.id, p.children_left),
                completable AS (
                    UPDATE runner.jobs j SET state = 'running', phase = 'complete', lease_until = now()
                    FROM counted c WHERE j.id = c.id AND c.children_left = 0 AND j.state = 'waiting'
                    RETURNING j.id),
                asked AS (
                    SELECT pg_notify('runner_cancel', c.key) FROM runner.jobs c
                    WHERE c.parent_id IN (SELECT id FROM waiting_parents) AND c.state = 'running' AND c.status IS NULL)
                SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM asked), (SELECT count(*) FROM completable)
                """, [key]).first ?? []
            if children.count > 2, children[2] != "0" { try db.query("SELECT pg_notify('runner_jobs', '')") }
            let childrenCancelled = children.first.flatMap { $0.flatMap { Int($0) } } ?? 0
            return (queued + childrenCancelled, running)
        }
    }

    // MARK: - Status

    /// How far back `status` counts the jobs that ended: a day, not every row `--keep` keeps.
    package static let recent = Duration.seconds(86_400)

    /// Counts fleet-wide (the ended jobs of the last `recent`); up to 100 running jobs and 10
    /// recent failures.
    package func status() throws(QueueError) -> QueueStatus {
        let counts = try connection.query(
            """
            SELECT count(*) FILTER (WHERE state = 'queued' OR (state = 'running' AND lease_until < now())),
                   count(*) FILTER (WHERE state = 'done' AND status IN ('succeeded', 'notModified') AND finished_at > now() - $1::interval),
                   count(*) FILTER (WHERE state = 'done' AND status = 'cancelled' AND finished_at > now() - $1::interval),
                   count(*) FILTER (WHERE state = 'done' AND status NOT IN ('succeeded', 'notModified', 'cancelled', 'notFound')
                       AND finished_at > now() - $1::interval),
                   count(*) FILTER (WHERE state = 'done' AND status = 'notFound' AND finished_at > now() - $1::interval)
            FROM runner.jobs
            """, ["\(Self.recent.inMilliseconds) milliseconds"]).first ?? []
        func number(_ index: Int) -> Int { counts.count > index ? Int(counts[index] ?? "0") ?? 0 : 0 }
        let running = try connection.query(
            """
            SELECT key, runner, extract(epoch FROM started_at)::float8,
                CASE WHEN phase = 'complete' THEN 'completing' WHEN status IS NOT NULL THEN 'hooks' END
            FROM runner.jobs
            WHERE state = 'running' AND lease_until >= now() ORDER BY started_at LIMIT 100
            """).map { row in
                QueueStatus.Running(
                    key: row[0] ?? "", runner: row[1] ?? "", startedAt: Date(timeIntervalSince1970: Double(row[2] ?? "0") ?? 0),
                    phase: row.count > 3 ? row[3] : nil)
            }
        let failed = try connection.query(
            """
            SELECT key, CASE WHEN hooks_failed IS NULL THEN status ELSE 'hooks' END, coalesce(hooks_failed, reason),
                extract(epoch FROM finished_at)::float8 FROM runner.jobs
            WHERE state = 'done' AND (status NOT IN ('succeeded', 'notModified', 'cancelled', 'notFound') OR hooks_failed IS NOT NULL)
            ORDER BY finished_at DESC LIMIT 10
            """).map { row in
                QueueStatus.Failed(key: row[0] ?? "", status: row[1] ?? "", reason: row[2], at: Date(timeIntervalSince1970: Double(row[3] ?? "0") ?? 0))
            }
        var status = QueueStatus(queued: number(0), running: running, done: number(1), failed: number(3), cancelled: number(2), latestFailed: failed)
        status.notFound = number(4)
        status.watchers = try connection.query(
            """
            SELECT w.name, w.host, w.version, array_to_string(w.kinds, ' '), w.lease_ms, extract(epoch FROM w.started_at)::float8,
                (extract(epoch FROM now() - w.heartbeat_at) * 1000)::bigint,
                (SELECT count(*) FROM runner.jobs j WHERE j.runner = w.name AND j.state = 'running')
            FROM runner.watchers w WHERE w.heartbeat_at > now() - interval '1 hour' ORDER BY w.started_at
            """).map { row in
                var watcher = QueueWatcher(
                    name: row[0] ?? "", host: row[1] ?? "", version: row[2] ?? "", kinds: (row[3] ?? "").split(separator: " ").map(String.init),
                    lease: .milliseconds(Int(row[4] ?? "0") ?? 0))
                watcher.startedAt = Date(timeIntervalSince1970: Double(row[5] ?? "0") ?? 0)
                watcher.silentFor = .milliseconds(max(0, Int(row[6] ?? "0") ?? 0))
                watcher.running = Int(row[7] ?? "0") ?? 0
                return watcher
            }
        status.parents = try parentsWaiting()
        let lost = try connection.query(
            """
            SELECT count(*) FILTER (WHERE state = 'running' AND lease_until < now()),
                   count(*) FILTER (WHERE claims > 1 AND state <> 'done')
            FROM runner.jobs WHERE state IN ('running', 'waiting', 'queued')
            """).first ?? []
        status.abandoned = lost.first.flatMap { $0.flatMap { Int($0) } } ?? 0
        status.reclaimed = lost.count > 1 ? lost[1].flatMap { Int($0) } ?? 0 : 0
        status.pausedHosts = try connection.query(
            "SELECT host, (extract(epoch FROM paused_until - now()) * 1000)::bigint FROM runner.hosts WHERE paused_until > now() ORDER BY host"
        ).compactMap { row in
            guard let host = row[0], let left = row[1].flatMap({ Int($0) }) else { return nil }
            return (host, .milliseconds(left))
        }
        status.batches = try connection.query(
            """
            SELECT batch, extract(epoch FROM min(submitted_at))::float8
            FROM runner.jobs WHERE batch IS NOT NULL GROUP BY batch ORDER BY min(submitted_at) DESC LIMIT 10
            """
        ).compactMap { row -> (String, Date, QueueBatchStatus)? in
            guard let id = row[0] else { return nil }
            return (id, Date(timeIntervalSince1970: Double(row[1] ?? "0") ?? 0), QueueBatchStatus())
        }
        for index in status.batches.indices { status.batches[index].counts = try batchStatus(status.batches[index].id) }
        status.waiting = Self.value(try connection.query("SELECT count(*) FROM runner.jobs WHERE state = 'waiting'")).flatMap { Int($0) } ?? 0
        let liveKinds = Set(status.watchers.filter(\.isLive).flatMap(\.kinds))
        status.unclaimable = try connection.query(
            "SELECT kind, count(*) FROM runner.jobs WHERE state = 'queued' GROUP BY kind ORDER BY kind"
        ).compactMap { row in
            guard let kind = row[0], !liveKinds.contains(kind) else { return nil }
            return (kind, Int(row[1] ?? "0") ?? 0)
        }
        return status
    }

    /// The record stored for the last finished job of `key`, if any.
    package func record(key: String) throws(QueueError) -> String? {
        Self.value(try connection.query(
            "SELECT record FROM runner.jobs WHERE key = $1 AND record IS NOT NULL ORDER BY finished_at DESC LIMIT 1", [key]))
    }

    /// The key's last record as the fleet keeps it (`results`): what the next runner of the key
    /// revalidates with.
    package func keyRecord(_ key: String) throws(QueueError) -> String? {
        Self.value(try connection.query("SELECT record FROM runner.results WHERE key = $1", [key]))
    }

    // MARK: - The output

    /// The queue's id, and the output folder its first watcher stamped (nil until one did).
    package func identity() throws(QueueError) -> QueueIdentity {
        Self.identity(try connection.query("SELECT id, folder, output, stamped_by FROM runner.identity LIMIT 1"))
    }

    /// Records `folder` (the id in an output folder's stamp) as the queue's output unless one
    /// is recorded already; returns the queue's identity after.
    package func recordOutput(folder: String, path: String, runner: String) throws(QueueError) -> QueueIdentity {
        try connection.query(
            """
            UPDATE runner.identity SET folder = $1, output = $2, stamped_by = $3, stamped_at = now() WHERE folder IS NULL
            """, [folder, path, runner])
        return try identity()
    }

    private static func identity(_ rows: [[String?]]) -> QueueIdentity {
        let row = rows.first ?? []
        func column(_ index: Int) -> String? { row.count > index ? row[index] : nil }
        return QueueIdentity(id: column(0) ?? "", folder: column(1), output: column(2), stampedBy: column(3))
    }
}
