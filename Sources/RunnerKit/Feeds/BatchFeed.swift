/// The jobs of a set of job files, as both a run and a watcher take them: every file validated
/// first (nothing runs if any is invalid); up to `keep` jobs kept from that pass and run
/// without reading again; beyond that, the files read again as the engine takes jobs, so a
/// batch of millions of lines runs in flat memory.
///
/// A file that changes between the two reads (rewritten or truncated in place) ends the same
/// way everywhere: lines that no longer hold a valid job are not run and are listed in
/// `changes`; the jobs that still read run; the caller reports the change and fails the file.
public final class BatchFeed: JobFeed, @unchecked Sendable {  // taken from by one task at a time
    package let files: [String]
    private let registry: KindRegistry
    private let shard: Shard?
    private let skipping: Set<String>
    private let limits: JobLimits
    private let keep: Int
    private var kept: [JobDescriptor]?
    private let changed = Locked<[JobFileError]>([])
    /// The jobs the engine takes, made at its first `next()`.
    private var taking: AnyIterator<JobDescriptor>?

    /// Jobs kept from validation, up to this many across all files (every shard counted). A kept
    /// job takes about 0.7 KB, so this bounds the extra memory near 7 MB; reading a line again
    /// costs about 5 µs, a small share of a job.
    package static let defaultKeep = 10_000

    /// Jobs of the job files `files`, decoded through `registry`; `limits` caps what a job may
    /// ask (a job asking more is invalid).
    public convenience init(files: [String], registry: KindRegistry, limits: JobLimits = .none) {
        self.init(files: files, registry: registry, shard: nil, skipping: [], limits: limits)
    }

    /// Jobs run are those of `shard` (all without one) whose key is not in `skipping` (keys that
    /// need no further run, as `--resume` finds them in a run log).
    package init(
        files: [String], registry: KindRegistry, shard: Shard?, skipping: Set<String> = [], limits: JobLimits = .none,
        keep: Int = defaultKeep
    ) {
        self.limits = limits
        self.files = files
        self.registry = registry
        self.shard = shard
        self.skipping = skipping
        self.keep = keep
    }

    /// What validation found.
    package struct Validation: Sendable {
        /// Jobs of this shard in each file, in the order of `files`.
        package var jobs: [Int]
        /// Every error, at most `limit` per file.
        package var errors: [JobFileError]
        /// Jobs of the shard left out because their key is in `skipping`.
        package var skipped = 0
        /// Their keys, each once, in the order first read.
        package var skippedKeys: [String] = []
        package var total: Int { jobs.reduce(0, +) }
    }

    /// Reads every file once, keeping up to `keep` valid jobs of the shard.
    package func validate(limit: Int = 20) -> Validation {
        var kept: [JobDescriptor]? = []
        var read = 0
        var validation = Validation(jobs: [], errors: [])
        var skipped = 0
        var skippedKeys: [String] = []
        var seen = Set<String>()
        for file in files {
            let report = JobFileReader.validate(path: file, registry: registry, limits: limits, limit: limit) { job in
                read += 1
                if read > self.keep { kept = nil }
                guard self.selects(job) else {
                    if self.shard?.contains(key: job.key) ?? true {
                        skipped += 1
                        if seen.insert(job.key).inserted { skippedKeys.append(job.key) }
                    }
                    return false
                }
                kept?.append(job)
                return true
            }
            validation.jobs.append(report.jobs)
            validation.errors.append(contentsOf: report.errors)
        }
        validation.skipped = skipped
        validation.skippedKeys = skippedKeys
        self.kept = validation.errors.isEmpty ? kept : nil
        return validation
    }

    private func selects(_ job: JobDescriptor) -> Bool {
        (shard?.contains(key: job.key) ?? true) && !skipping.contains(job.key)
    }

    /// Lines that no longer held a valid job when read to run.
    package var changes: [JobFileError] { changed.value }

    /// The next job to run (a `JobFeed`): nothing to hear when it ends.
    public func next() async -> FeedJob? {
        if taking == nil { taking = makeIterator() }
        return taking?.next().map { FeedJob($0) }
    }

    /// The jobs to run: the kept ones, each let go as it is taken, or a second read.
    public func makeIterator() -> AnyIterator<JobDescriptor> {
        if let jobs = kept.take() {
            var reversed = jobs
            reversed.reverse()
            return AnyIterator { reversed.popLast() }
        }
        let registry = self.registry
        let limits = self.limits
        let changed = self.changed
        var remaining = files[...]
        var reader: JobFileReader?
        return AnyIterator {
            while true {
                if reader == nil {
                    guard let file = remaining.popFirst() else { return nil }
                    reader = JobFileReader(path: file, registry: registry, limits: limits)
                }
                guard let element = reader?.next() else {
                    reader = nil
                    continue
                }
                switch element {
                case .success(let job):
                    if self.selects(job) { return job }
                case .failure(let error):
                    changed.withLock { $0.append(error) }
                }
            }
        }
    }
}
