import Foundation
import RunnerKit

/// `runner schedule add|list|remove|next`: schedules kept in the queue, fired by its watchers,
/// each tick one batch across the fleet; and `next`, when an expression fires, with no database.
enum ScheduleCommands {
    static let cronOption = CommandOption<String?>.text(
        "cron", "EXPR", help: "add: fire at the times of a cron expression (five fields, or @hourly, @daily, @weekly, @monthly, @yearly), read as Debian's cron reads it.")
    static let everyOption = CommandOption<String?>.text(
        "every", "DURATION", help: "add: fire every DURATION instead (30s, 5m, 2h; at least 1s), at its multiples since 1970-01-01 00:00 UTC.")
    static let zoneOption = CommandOption<String?>.text(
        "tz", "ZONE", help: "add, next: the time zone of the cron expression, such as Europe/Berlin.", defaultText: "UTC")
    static let catchUpOption = CommandOption<String?>.text(
        "catch-up", "MODE",
        help: "add: what ticks missed while no watcher ran become: one (one batch for them all), none (dropped) or all (one batch each).",
        defaultText: "one")
    static let fromOption = CommandOption<String?>.text(
        "from", "TIME", help: "next: the times after TIME (2026-03-29T01:30:00+01:00; without an offset, in --tz).", defaultText: "now")
    static let countOption = CommandOption<Int>.int("count", default: 5, range: 1...10_000, help: "next: how many times to print.")
    static let jsonOption = CommandOption<Bool>.flag("json", help: "list: one JSON object a schedule, one a line.")

    static let spec: CommandSpec = CommandSpec(
        name: "schedule",
        summary: "Keep job files in the queue and have its watchers submit them on a cron schedule, once a tick across the fleet.",
        synopsis: "(add NAME FILE… | list | remove NAME | next EXPR)",
        arguments: [
            ("add NAME FILE…", "Store a schedule: the files are validated as submit validates them and kept in the queue (needs --cron or --every)."),
            ("list", "Each schedule: its expression, zone, next time, last time and last batch."),
            ("remove NAME", "End a schedule; its batches stay."),
            ("next EXPR", "Print the next times a cron expression fires, one ISO 8601 time a line, with no database."),
        ],
        options: [cronOption.spec, everyOption.spec, zoneOption.spec, catchUpOption.spec, fromOption.spec, countOption.spec, jsonOption.spec,
                  QueueOptions.queue.spec] + KindOptions.options,
        positionals: (1, nil),
        positionalCompletion: .files,
        run: { arguments in await run(arguments) })

    static func usage(_ message: String) -> Int32 { Runner.usageError(UsageError(message), spec: spec) }

    static func run(_ arguments: ParsedArguments) async -> Int32 {
        let action = arguments.positionals[0]
        let rest = Array(arguments.positionals.dropFirst())
        let given = Set(arguments.values.keys).union(arguments.flags)
        let allowed: Set<String>
        switch action {
        case "add": allowed = ["cron", "every", "tz", "catch-up", "queue", "kinds", "config"]
        case "list": allowed = ["json", "queue"]
        case "remove": allowed = ["queue"]
        case "next": allowed = ["tz", "from", "count"]
        default: return usage("schedule takes add, list, remove or next, not '\(action)'")
        }
        if let wrong = given.subtracting(allowed).sorted().first { return usage("--\(wrong) does not apply to schedule \(action)") }
        switch action {
        case "next": return next(rest, arguments)
        case "list":
            guard rest.isEmpty else { return usage("schedule list takes no argument") }
        case "remove":
            guard rest.count == 1 else { return usage("schedule remove takes one NAME") }
        default:
            guard rest.count >= 2 else { return usage("schedule add takes a NAME and at least one FILE") }
        }
        let url: String?
        do { url = try QueueOptions.url(arguments) } catch { return usage(error.description) }
        guard let url else { return usage("schedule \(action) needs --queue URL (or $RUNNER_QUEUE): schedules live in the queue") }
        switch action {
        case "list": return list(url: url, json: (try? arguments[jsonOption]) ?? false)
        case "remove": return remove(rest[0], url: url)
        default: return await add(name: rest[0], files: Array(rest.dropFirst()), arguments, url: url)
        }
    }

    // MARK: - next

    static func zone(_ arguments: ParsedArguments) -> TimeZone? {
        guard let name = try? arguments[zoneOption] else { return TimeZone(identifier: "UTC") }
        return TimeZone(identifier: name)
    }

    static func next(_ rest: [String], _ arguments: ParsedArguments) -> Int32 {
        guard rest.count == 1 else { return usage("schedule next takes one EXPR (quoted: \"*/15 * * * *\")") }
        guard let zone = zone(arguments) else { return usage("--tz: \((try? arguments[zoneOption]) ?? "") is not a time zone (such as UTC or Europe/Berlin)") }
        let expression: CronExpression
        do { expression = try CronExpression(rest[0]) } catch {
            Console.error("\"\(rest[0])\": \(error)")
            return 2
        }
        var date = Date()
        if let from = try? arguments[fromOption] {
            guard let parsed = CronExpression.parseTime(from, in: zone) else {
                return usage("--from: '\(from)' is not a time such as 2026-03-29T01:30:00+01:00 or 2026-03-29T01:30")
            }
            date = parsed
        }
        let count = (try? arguments[countOption]) ?? 5
        var lines: [String] = []
        for _ in 0..<count {
            guard let following = expression.next(after: date, in: zone) else { break }
            lines.append(CronExpression.iso8601(following, in: zone))
            date = following
        }
        Console.out(lines.joined(separator: "\n"))
        return 0
    }

    // MARK: - add

    static func add(name: String, files: [String], _ arguments: ParsedArguments, url: String) async -> Int32 {
        guard !name.isEmpty, name.count <= 200, !name.contains(where: { $0.isNewline }) else {
            return usage("NAME must be one line of at most 200 characters")
        }
        let cron = try? arguments[cronOption]
        let every = try? arguments[everyOption]
        let timing: ScheduleTiming
        switch (cron, every) {
        case (let cron?, nil):
            guard let zone = zone(arguments) else { return usage("--tz: \((try? arguments[zoneOption]) ?? "") is not a time zone (such as UTC or Europe/Berlin)") }
            do { timing = .cron(try CronExpression(cron), zone: zone) } catch {
                Console.error("--cron \"\(cron)\": \(error)")
                return 2
            }
        case (nil, let every?):
            if (try? arguments[zoneOption]) != nil { return usage("--tz applies to --cron; --every counts from 1970-01-01 00:00 UTC") }
            do { timing = .every(seconds: try ScheduleTiming.period(every)) } catch {
                Console.error("\(error)")
                return 2
            }
        default:
            return usage("schedule add takes --cron EXPR or --every DURATION (one of them)")
        }
        let catchUpText: String = ((try? arguments[catchUpOption]) ?? nil) ?? "one"
        guard let catchUp = Schedule.CatchUp(rawValue: catchUpText) else {
            return usage("--catch-up is one of one, none or all, not '\(catchUpText)'")
        }
        guard let registry = KindOptions.registry(arguments, checkingSecrets: false) else { return 2 }
        let inputs: JobFileArguments
        do { inputs = try JobFileArguments(files) } catch { return usage(error.description) }
        defer { inputs.remove() }
        var invalid = false
        for file in inputs.files {
            let report = JobFileReader.validate(path: file, registry: registry, limits: .producer, checkingSecrets: false)
            for error in report.errors { Console.error(inputs.display(message: "\(error)")) }
            if !report.errors.isEmpty { invalid = true }
        }
        if invalid {
            Console.err("No schedule was added. See 'runner validate --help'.")
            return 2
        }
        var jobs: [QueueSubmission] = []
        var names: [String] = []
        for file in inputs.files {
            let shown = (inputs.display(file) as NSString).lastPathComponent
            guard let some = QueueCommands.submissions(of: file, name: shown, registry: registry) else {
                Console.error(inputs.display(message: "changed while it was being read; no schedule was added"))
                return 1
            }
            jobs += some
            names.append(inputs.display(file))
        }
        let schedule = Schedule(name: name, timing: timing, catchUp: catchUp, jobs: jobs, files: names)
        do {
            let queue = try JobQueue(url: url)
            let made = try queue.addSchedule(schedule)
            Console.out(
                "schedule \(name) in \(queue.connection.display): \(timingText(timing)), catch-up \(catchUp.rawValue); "
                    + "\(jobs.count) job\(jobs.count == 1 ? "" : "s") of \(names.joined(separator: ", ")); next \(made.nextAt.map { iso($0, timing) } ?? "never")")
            return 0
        } catch {
            return QueueOptions.fail(error)
        }
    }

    // MARK: - list and remove

    static func timingText(_ timing: ScheduleTiming) -> String {
        switch timing {
        case .cron(let expression, let zone): return "cron \"\(expression.text)\" (\(zone.identifier))"
        case .every: return timing.description
        }
    }

    static func zone(of timing: ScheduleTiming) -> TimeZone {
        if case .cron(_, let zone) = timing { return zone }
        return TimeZone(identifier: "UTC")!
    }

    static func iso(_ date: Date, _ timing: ScheduleTiming) -> String { CronExpression.iso8601(date, in: zone(of: timing)) }
    static func iso(_ date: Date) -> String { CronExpression.iso8601(date, in: TimeZone(identifier: "UTC")!) }

    static func list(url: String, json: Bool) -> Int32 {
        let schedules: [Schedule]
        let display: String
        do {
            let queue = try JobQueue(url: url)
            schedules = try queue.schedules()
            display = queue.connection.display
        } catch {
            return QueueOptions.fail(error)
        }
        if json {
            for schedule in schedules {
                var fields: [(key: String, value: JSONValue)] = [("name", .string(schedule.name))]
                switch schedule.timing {
                case .cron(let expression, let zone):
                    fields += [("cron", .string(expression.text)), ("zone", .string(zone.identifier))]
                case .every(let seconds):
                    fields += [("everySeconds", JSONValue(Int(seconds))), ("zone", .string("UTC"))]
                }
                fields += [
                    ("catchUp", .string(schedule.catchUp.rawValue)), ("files", .array(schedule.files.map { .string($0) })),
                    ("jobs", JSONValue(schedule.jobs.count)),
                    ("next", schedule.nextAt.map { .string(iso($0, schedule.timing)) } ?? .null),
                    ("last", schedule.lastTick.map { .string(iso($0, schedule.timing)) } ?? .null),
                    ("lastBatch", schedule.lastBatch.map { .string($0) } ?? .null),
                ]
                Console.out(JSONWriter.string(.object(fields)))
            }
            return 0
        }
        guard !schedules.isEmpty else {
            Console.out("no schedule in \(display)")
            return 0
        }
        for schedule in schedules {
            Console.out(
                [
                    "\(schedule.name): \(timingText(schedule.timing)), catch-up \(schedule.catchUp.rawValue), "
                        + "\(schedule.jobs.count) job\(schedule.jobs.count == 1 ? "" : "s") of \(schedule.files.joined(separator: ", "))",
                    "  next:  \(schedule.nextAt.map { iso($0, schedule.timing) } ?? "never")",
                    "  last:  " + (schedule.lastTick.map { iso($0, schedule.timing) + " (batch \(schedule.lastBatch ?? "-"))" } ?? "never"),
                ].joined(separator: "\n"))
        }
        return 0
    }

    static func remove(_ name: String, url: String) -> Int32 {
        do {
            let queue = try JobQueue(url: url)
            guard try queue.removeSchedule(name) else {
                Console.error("no schedule named \(Printable.escaped(name)) in \(queue.connection.display) ('runner schedule list' lists them)")
                return 1
            }
            Console.out("schedule \(name) removed from \(queue.connection.display); its batches stay")
            return 0
        } catch {
            return QueueOptions.fail(error)
        }
    }

    /// What a watcher says when it fired a tick.
    static func firedLine(_ fired: Schedule.Fired) -> String { fired.line }
}
