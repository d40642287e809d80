import Foundation

/// A subcommand as a table row: its help text, its options and what it runs.
/// The parser, the usage line, the help, the completions and the man page all read this table,
/// so none of them can drift from parsing.
struct CommandSpec: Sendable {
    /// An option as the parser and the help see it; declared with the type of its value as a
    /// `CommandOption`, whose `spec` this is.
    struct Option: Sendable {
        /// Long name without dashes, e.g. "out".
        var name: String
        /// Placeholder of the value (e.g. "DIR"), or nil for a flag.
        var value: String?
        /// One or two short sentences, without the default.
        var help: String
        /// The default as help shows it, or nil when there is nothing to say.
        var defaultText: String? = nil
        /// Given more than once, every value counts.
        var repeatable = false
        /// What a shell offers for the value; nil: judged from the placeholder (`ValueCompletion.guess`).
        var completion: ValueCompletion? = nil

        /// The help with its default, as help, completions and the man page show it.
        var fullHelp: String { help + (defaultText.map { " (default: \($0))" } ?? "") }

        /// How the usage line shows it: `[--out DIR]`, `[--kinds DIR]…`.
        var usage: String { "[--\(name)" + (value.map { " \($0)" } ?? "") + "]" + (repeatable ? "…" : "") }

        /// What a shell offers for the value of this option.
        var valueCompletion: ValueCompletion {
            guard let value else { return .nothing }
            return completion ?? ValueCompletion.guess(value)
        }
    }

    var name: String
    var summary: String
    /// The arguments' part of the synopsis, e.g. `FILE…`; the options follow it in `usage`.
    var synopsis: String = ""
    var arguments: [(name: String, help: String)] = []
    var options: [Option] = []
    /// Least and most positional arguments (nil: no upper bound).
    var positionals: (min: Int, max: Int?) = (0, 0)
    /// Listed in `runner --help` unless hidden (diagnostics for tests).
    var hidden = false
    /// What a shell offers for the positional arguments; nil: judged from the first argument's name.
    var positionalCompletion: ValueCompletion? = nil
    var run: @Sendable (ParsedArguments) async -> Int32

    /// Synopsis after `runner <name> `: the arguments, then every option.
    var usage: String { ([synopsis] + options.map(\.usage)).filter { !$0.isEmpty }.joined(separator: " ") }

    var helpText: String {
        var text = "OVERVIEW: \(summary)\n\nUSAGE: runner \(name) \(usage)\n"
        if !arguments.isEmpty {
            text += "\nARGUMENTS:\n"
            for argument in arguments { text += Self.row(argument.name, argument.help) }
        }
        text += "\nOPTIONS:\n"
        for option in options {
            text += Self.row("--\(option.name)" + (option.value.map { " \($0)" } ?? ""), option.fullHelp)
        }
        text += Self.row("-h, --help", "Show help information.")
        return text
    }

    /// What a shell offers for the positional arguments of this command.
    var argumentCompletion: ValueCompletion {
        if let positionalCompletion { return positionalCompletion }
        guard positionals.max != 0, let first = arguments.first else { return .nothing }
        return ValueCompletion.guess(first.name)
    }

    static func row(_ left: String, _ right: String) -> String {
        let pad = left.count < 24 ? String(repeating: " ", count: 24 - left.count) : "\n" + String(repeating: " ", count: 26)
        return "  \(left)\(pad)\(right)\n"
    }
}

/// Arguments after parsing against a `CommandSpec`.
struct ParsedArguments: Sendable {
    var positionals: [String] = []
    var values: [String: String] = [:]
    /// Every value of an option given more than once, in order (`values` keeps the last).
    var repeated: [String: [String]] = [:]
    var flags: Set<String> = []

    func value(_ name: String) -> String? { values[name] }
    func allValues(_ name: String) -> [String] { repeated[name] ?? [] }
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// A whole number option within bounds, or a usage error.
    func int(_ name: String, default defaultValue: Int, range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let text = values[name] else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError("--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return value
    }
}

/// A mistake in how the command was called: exit 2 with the usage line.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension CommandSpec {
    func parse(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            var name = String(argument.drop(while: { $0 == "-" }))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = options.first(where: { $0.name == name }) else {
                throw UsageError("Unknown option '\(argument)'")
            }
            if option.value == nil {
                if inlineValue != nil { throw UsageError("--\(name) takes no value") }
                parsed.flags.insert(name)
            } else if let inlineValue {
                parsed.values[name] = inlineValue
                parsed.repeated[name, default: []].append(inlineValue)
            } else {
                guard index < arguments.count else { throw UsageError("Missing value for '--\(name) \(option.value!)'") }
                parsed.values[name] = arguments[index]
                parsed.repeated[name, default: []].append(arguments[index])
                index += 1
            }
        }
        if parsed.positionals.count < positionals.min, let first = self.arguments.first {
            throw UsageError("Missing expected argument '\(first.name)'")
        }
        if let max = positionals.max, parsed.positionals.count > max {
            throw UsageError("Unexpected argument '\(parsed.positionals[max])'")
        }
        return parsed
    }
}
