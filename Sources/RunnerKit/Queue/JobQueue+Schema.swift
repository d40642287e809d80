/// The queue's tables: made on first use, in one transaction (of several runners starting at
/// once, one makes them and the others wait), their version recorded and a newer one refused;
/// what version 1 lacks is added when missing.
extension JobQueue {
    /// Makes the tables if missing, or checks and upgrades them, in one transaction.
    func prepare() throws(QueueError) {
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

    /// A submitted file's jobs by batch and file, and those of them left to run: whether a
    /// file's jobs all ended is asked each time a watcher ends the last job it holds of it
    /// (`fileOutcome`), and must walk neither the batch nor the table.
    static let fileIndexes = [
        "CREATE INDEX IF NOT EXISTS jobs_file ON runner.jobs (batch, file)",
        "CREATE INDEX IF NOT EXISTS jobs_file_open ON runner.jobs (batch, file) WHERE \(leftToRun)",
    ]

    /// A job left to run: queued, waiting for its children, or running its own job (not its
    /// hooks). One text for `jobs_file_open` and the statements it serves: the planner uses a
    /// partial index only for a condition that implies the index's own.
    static let leftToRun = "(state = 'queued' OR state = 'waiting' OR (state = 'running' AND status IS NULL))"

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
                to_regclass('runner.bandwidth') IS NOT NULL,
                to_regclass('runner.jobs_file_open') IS NOT NULL AND to_regclass('runner.jobs_file') IS NOT NULL
            """).first ?? []
        if present.count > 9 && present[1] == "t" && present[9] != "t" {
            // Only speed depends on them: a role that may not make them (a producer's, on
            // tables an older watcher made) goes on without, and the next watcher makes them.
            try db.query("SAVEPOINT file_indexes")
            do {
                for index in Self.fileIndexes { try db.query(index) }
            } catch {
                try db.query("ROLLBACK TO SAVEPOINT file_indexes")
            }
        }
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
            for index in Self.fileIndexes { try db.query(index) }
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
}
