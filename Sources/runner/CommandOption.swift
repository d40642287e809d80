import Foundation
import RunnerKit

/// An option declared once: its name, the type of its value, its default and its help. The
/// parser, the usage line, the help, the completions and the man page read `spec`; a command
/// reads the typed value with `arguments[option]`.
struct CommandOption<Value: Sendable>: Sendable {
    let spec: CommandSpec.Option
    /// The value of what was given (nil: not given, the default).
    let read: @Sendable (String?) throws(UsageError) -> Value

    /// A flag: true when given.
    static func flag(_ name: String, help: String) -> CommandOption<Bool> {
        CommandOption<Bool>(spec: .init(name: name, value: nil, help: help)) { $0 != nil }
    }

    /// A string, nil when not given.
    static func text(
        _ name: String, _ placeholder: String, help: String, defaultText: String? = nil, completion: ValueCompletion? = nil
    ) -> CommandOption<String?> {
        CommandOption<String?>(spec: .init(name: name, value: placeholder, help: help, defaultText: defaultText, completion: completion)) { $0 }
    }

    /// A string with a default.
    static func text(_ name: String, _ placeholder: String, default value: String, shown: String? = nil, help: String) -> CommandOption<String> {
        CommandOption<String>(spec: .init(name: name, value: placeholder, help: help, defaultText: shown ?? value)) { $0 ?? value }
    }

    /// Every value of a repeatable option, in order.
    static func list(_ name: String, _ placeholder: String, help: String, defaultText: String? = nil) -> CommandOption<[String]> {
        CommandOption<[String]>(spec: .init(name: name, value: placeholder, help: help, defaultText: defaultText, repeatable: true)) { _ in [] }
    }

    /// A whole number within `range`.
    static func int(_ name: String, _ placeholder: String = "N", default value: Int, range: ClosedRange<Int>, help: String) -> CommandOption<Int> {
        CommandOption<Int>(spec: .init(name: name, value: placeholder, help: help, defaultText: "\(value)")) { text throws(UsageError) in
            guard let text else { return value }
            guard let number = Int(text), range.contains(number) else {
                throw UsageError("--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
            }
            return number
        }
    }

    /// A number of seconds from 0 to a day.
    static func seconds(_ name: String, default value: Duration, help: String) -> CommandOption<Duration> {
        CommandOption<Duration>(spec: .init(name: name, value: "SECONDS", help: help, defaultText: value.secondsText)) { text throws(UsageError) in
            guard let text else { return value }
            guard let number = Double(text), number >= 0, number <= 86_400 else {
                throw UsageError("--\(name) must be a number of seconds from 0 to 86400, not '\(text)'")
            }
            return Duration(seconds: number)
        }
    }
}

extension ParsedArguments {
    /// The typed value of `option`: the default when it was not given.
    subscript<Value>(_ option: CommandOption<Value>) -> Value {
        get throws(UsageError) {
            if option.spec.repeatable, let values = allValues(option.spec.name) as? Value { return values }
            if option.spec.value == nil { return try option.read(flag(option.spec.name) ? "" : nil) }
            return try option.read(value(option.spec.name))
        }
    }
}
