extension QueueFeed {
    /// What the feed asks of its queue: the core (claims, records, the roster, notices) and the
    /// capabilities it runs jobs with: key locks, parents, a claim's progress, the fleet's
    /// housekeeping, pacing and output, and a file's outcome. Both stores have them all;
    /// schedules (`ScheduleFiring`) are asked for apart, by the feed that fires them.
    package typealias Store = QueueStore & QueueKeyLocks & QueueParents & QueueClaimProgress & QueueMaintenance & QueuePacing
        & QueueSharedOutput & QueueFileOutcomes
}
