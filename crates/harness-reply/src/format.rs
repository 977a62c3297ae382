//! The call formats: one per model family, and `auto`.

use serde::Serialize;

/// A model family's way of writing tool calls in text, or `Auto` to detect it from markers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyFormat {
    /// Detect the family from the first marker in the reply; JSON when there is none.
    #[default]
    Auto,
    /// A call written out as JSON (`{"tool": ..., "arguments": ...}` and the usual variants).
    Json,
    /// Hermes / Qwen 2.5 / Qwen3: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`.
    Hermes,
    /// Qwen3-Coder / Qwen3.5: `<tool_call><function=NAME><parameter=K>V</parameter>...`.
    Qwen3Coder,
    /// Mistral: `[TOOL_CALLS]NAME[ARGS]{...}`, `[CALL_ID]`, or the older `[TOOL_CALLS][{...}]`.
    Mistral,
    /// Llama 3.x / 4: `<|python_tag|>{"name": ..., "parameters": ...}`.
    Llama3,
    /// gpt-oss Harmony: `<|channel|>commentary to=functions.NAME ...<|message|>{...}`.
    Harmony,
    /// DeepSeek V3 / R1 / V3.1: `<｜tool▁call▁begin｜>...<｜tool▁sep｜>...<｜tool▁call▁end｜>`.
    DeepseekV3,
    /// DeepSeek V3.2 DSML: `<｜DSML｜function_calls><｜DSML｜invoke name="...">...`.
    DeepseekV32,
    /// DeepSeek V4 / V4.1 DSML: `<｜DSML｜tool_calls>` (V4) or `<｜DSML｜ calls>` (V4.1) blocks.
    DeepseekV4,
    /// Kimi K2: `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}`.
    KimiK2,
    /// GLM 4.5+: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.
    Glm45,
    /// Kimi K3: `<|open|>call tool="NAME"<|sep|><|open|>argument key="K" type="T"<|sep|>V…`.
    KimiK3,
    /// Llama 4 / 3.2 pythonic: `[get_weather(city="LA"), get_time()]`, or in `<|python_start|>`.
    Llama4Pythonic,
    /// Gemma 4: `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`.
    Gemma4,
}

impl ReplyFormat {
    /// Every format, `auto` first, for help texts and error messages.
    pub const ALL: [ReplyFormat; 15] = [
        Self::Auto,
        Self::Json,
        Self::Hermes,
        Self::Qwen3Coder,
        Self::Mistral,
        Self::Llama3,
        Self::Harmony,
        Self::DeepseekV3,
        Self::DeepseekV32,
        Self::DeepseekV4,
        Self::KimiK2,
        Self::KimiK3,
        Self::Llama4Pythonic,
        Self::Glm45,
        Self::Gemma4,
    ];

    /// The format's name, as in configuration, on the command line and in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Json => "json",
            Self::Hermes => "hermes",
            Self::Qwen3Coder => "qwen3_coder",
            Self::Mistral => "mistral",
            Self::Llama3 => "llama3",
            Self::Harmony => "harmony",
            Self::DeepseekV3 => "deepseek_v3",
            Self::DeepseekV32 => "deepseek_v32",
            Self::DeepseekV4 => "deepseek_v4",
            Self::KimiK2 => "kimi_k2",
            Self::KimiK3 => "kimi_k3",
            Self::Llama4Pythonic => "llama4_pythonic",
            Self::Glm45 => "glm45",
            Self::Gemma4 => "gemma4",
        }
    }
}

impl std::str::FromStr for ReplyFormat {
    type Err = String;

    /// Parses a format name; the error lists the names there are.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.as_str()).collect();
            format!("unknown reply format {s:?}; use one of: {}", names.join(", "))
        })
    }
}

impl std::fmt::Display for ReplyFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
