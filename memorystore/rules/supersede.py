"""Which older memories of a user a new memory makes outdated, without a language model.

A pure rule module (precompiled regexes, no I/O, no model): `frame` reads an *attribute frame*
from a short memory text ("I moved to Shanghai last month" -> residence = shanghai) and
`retired_by` names the older memories of the same user that a new one makes outdated ("I live
in Hangzhou": "residence: hangzhou -> shanghai"). English and Chinese (and Chinese with Latin
words, "我现在用 VS Code 写代码"); first person ("I", "my", "我", "我的") or third person ("the
user", "user", "用户") as the subject, and "he"/"she"/"他"/"她" in a memory that names nobody
else; mem0-style subjectless facts ("Lives in Hangzhou", "住在杭州") are the user's. What is
said about someone else ("my sister lives in Paris", "我妈妈住在北京") gives no frame.

Precision first: retiring a true memory hides it from recall, which is worse than keeping a
stale one. Rules are anchored at the start of a clause; questions, hypotheticals ("if",
"maybe", "如果", "可能"), negations, hedges, future moves ("I'm moving to X next month") and
past states ("I lived in X") give no frame; a single-valued value must look like a name
(capitalised in English; "I live in fear" is no residence); values in different scripts
("杭州" / "Hangzhou"), a region and a city ("California" / "San Francisco"), or one value
containing the other ("Hangzhou" / "Hangzhou, China") never count as different. An old memory
is retired only when every fact it states is superseded and it says nothing else ("I live in
Hangzhou. I love hiking." stays; a question in it loses nothing). "We"/"我们" counts as the
user for where they live and what they plan only. Texts over `MAX_CHARS` are left alone.
Analyses are cached per text, so the older memories, analysed when they were written, cost
microseconds on each later write. `restates` uses the same frames the other way round: a new
memory whose every frame an older one already states (same slot, same value) is a repeat in
other words, which the text rules (`memorystore/rules/dedup.py`) cannot see.

Slots (`Frame.slot`):

- single-valued, a new value retires a different old one: ``residence``, ``employer``,
  ``job_title``, ``education`` (student roles, kept apart from jobs), ``school``,
  ``favourite:<noun>`` ("my favourite movie is X", "X is my go-to editor", "I prefer X for
  <noun>", "I use X as my main <noun>", "我最喜欢的<名词>是X", "<名词>我更喜欢X"), ``name``,
  ``age``, ``diet`` (vegetarian, vegan, pescatarian), ``diet_plan`` (keto, mediterranean...),
  ``relationship``, ``phone`` (brand and model), ``phone_number``, ``car``, ``laptop``;
- multi-valued, retired only by an explicit switch or cancellation that names the old value:
  ``usage:<category or ''>`` ("I use X (for C)", "I prefer X", "我用X写代码"), ``like:``
  ("I like X", "我喜欢X"), ``plan:<object>`` ("I'm planning a trip to Japan", "我打算去日本").

Markers carried by a frame:

- ``cancel=True``: "I no longer use X", "I cancelled my trip to Japan", "我不住在杭州了"; the
  frame states no new value (``value == ""``) and ``previous`` holds what is cancelled (for a
  plan the object is also in the slot, ``plan:japan``).
- ``previous="x"``: an explicit switch naming the old value ("I switched from X to Y",
  "我从X换成了Y", "I'm going to Korea instead of Japan").
- ``previous=""``: a change whose old value is not named ("I switched to Y", "我改用Y了",
  "from now on I use Y", "I got promoted to X", "I moved to X", "以后用Y"): the new
  value replaces a different old one of the same slot (or usage category) even when the old
  value is contained in the new one.
- an unnamed value keeps its article ("a fintech startup", "一家创业公司"): a named value
  retires it, it never retires one.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Frame", "frame", "frames", "restates", "retired_by", "supersedes"]


@dataclass(frozen=True)
class Frame:
    slot: str  # e.g. "residence", "employer", "favourite:movie", "plan:japan", "usage:"
    value: str  # normalised value, "" for a pure cancellation
    cancel: bool = False  # "I cancelled X / I no longer use X": retires frames matching X
    previous: str | None = None  # "switched from X to Y": the named old value X (normalised)


SINGLE_VALUED = frozenset(
    {
        "residence",
        "employer",
        "job_title",
        "education",
        "school",
        "name",
        "age",
        "diet",
        "diet_plan",
        "relationship",
        "phone",
        "phone_number",
        "car",
        "laptop",
    }
)


# ---------------------------------------------------------------------------------------------
# Lexicons
# ---------------------------------------------------------------------------------------------
def _words(text: str, sep: str | None = None) -> frozenset[str]:
    """A word list written as one string, split on whitespace or `sep`."""
    return frozenset(w.strip() for w in text.split(sep) if w.strip())


# Countries, provinces, states and regions: "I live in California" and "I live in San Francisco"
# can both be true, so a region is never compared with a city.
_EN_REGIONS = _words(
    """
    afghanistan|albania|algeria|argentina|armenia|australia|austria|azerbaijan|bangladesh|
    belarus|belgium|bolivia|brazil|bulgaria|cambodia|cameroon|canada|chile|china|colombia|
    croatia|cuba|cyprus|czechia|denmark|ecuador|egypt|england|estonia|ethiopia|finland|france|
    georgia|germany|ghana|greece|guatemala|hungary|iceland|india|indonesia|iran|iraq|ireland|
    israel|italy|jamaica|japan|jordan|kazakhstan|kenya|korea|south korea|kuwait|laos|latvia|
    lebanon|lithuania|luxembourg|malaysia|malta|mexico|mongolia|morocco|myanmar|nepal|
    netherlands|holland|new zealand|nigeria|norway|pakistan|panama|peru|philippines|poland|
    portugal|qatar|romania|russia|scotland|serbia|slovakia|slovenia|spain|
    sri lanka|sweden|switzerland|taiwan|thailand|tunisia|turkey|ukraine|uruguay|uzbekistan|
    venezuela|vietnam|wales|united kingdom|united states|america|europe|asia|africa|
    guangdong|zhejiang|jiangsu|sichuan|hubei|hunan|henan|hebei|shandong|shanxi|shaanxi|fujian|
    anhui|jiangxi|yunnan|guizhou|guangxi|hainan|liaoning|jilin|heilongjiang|
    california|texas|florida|new jersey|massachusetts|illinois|ohio|michigan|oregon|
    colorado|arizona|nevada|utah|virginia|north carolina|south carolina|pennsylvania|
    maryland|hawaii|alaska|minnesota|wisconsin|tennessee|kentucky|alabama|louisiana|
    ontario|quebec|british columbia|alberta|bavaria|bay area|silicon valley
    """,
    "|",
)

# Places "moved to X" / "left X" must name (English "moved to Neovim" or "moved to Google" are
# not residences), lowercase: the regions above and these cities.
_EN_PLACES = _EN_REGIONS | _words(
    """
    singapore|hong kong|macau|macao|beijing|shanghai|guangzhou|shenzhen|hangzhou|chengdu|
    chongqing|tianjin|nanjing|wuhan|xian|xi'an|suzhou|changsha|zhengzhou|qingdao|xiamen|
    dalian|ningbo|hefei|fuzhou|jinan|shenyang|harbin|changchun|kunming|guiyang|nanning|
    nanchang|taiyuan|shijiazhuang|lanzhou|urumqi|lhasa|hohhot|yinchuan|xining|haikou|sanya|
    zhuhai|dongguan|foshan|wuxi|changzhou|wenzhou|shaoxing|jiaxing|taipei|kaohsiung|tokyo|
    osaka|kyoto|yokohama|nagoya|sapporo|fukuoka|seoul|busan|bangkok|hanoi|ho chi minh city|
    saigon|manila|jakarta|bali|kuala lumpur|mumbai|delhi|new delhi|bangalore|bengaluru|
    hyderabad|chennai|kolkata|pune|karachi|lahore|dhaka|kathmandu|dubai|abu dhabi|doha|
    riyadh|tel aviv|jerusalem|istanbul|ankara|tehran|cairo|nairobi|lagos|johannesburg|
    cape town|casablanca|london|manchester|birmingham|liverpool|edinburgh|glasgow|dublin|
    paris|lyon|marseille|nice|berlin|munich|hamburg|frankfurt|cologne|stuttgart|vienna|
    zurich|geneva|basel|amsterdam|rotterdam|the hague|brussels|antwerp|copenhagen|stockholm|
    oslo|helsinki|reykjavik|madrid|barcelona|valencia|seville|lisbon|porto|rome|milan|
    naples|florence|venice|turin|athens|prague|budapest|warsaw|krakow|bucharest|sofia|
    belgrade|zagreb|moscow|saint petersburg|st petersburg|kyiv|kiev|minsk|riga|vilnius|
    tallinn|new york|brooklyn|manhattan|queens|boston|chicago|los angeles|san francisco|
    san jose|san diego|seattle|portland|austin|dallas|houston|san antonio|denver|phoenix|
    las vegas|salt lake city|miami|orlando|tampa|atlanta|nashville|charlotte|raleigh|
    washington|washington dc|dc|philadelphia|pittsburgh|baltimore|detroit|cleveland|
    columbus|minneapolis|st louis|kansas city|new orleans|honolulu|anchorage|sacramento|
    oakland|berkeley|palo alto|mountain view|cambridge|oxford|toronto|vancouver|montreal|
    calgary|ottawa|edmonton|sydney|melbourne|brisbane|perth|adelaide|canberra|auckland|
    wellington|mexico city|guadalajara|bogota|lima|santiago|buenos aires|sao paulo|
    são paulo|rio|rio de janeiro|havana
    """,
    "|",
)

_ZH_REGIONS = _words(
    """
    广东 浙江 江苏 四川 湖北 湖南 河南 河北 山东 山西 陕西 福建 安徽 江西
    云南 贵州 广西 海南 辽宁 吉林 黑龙江 内蒙古 新疆 西藏 甘肃 青海 宁夏 台湾
    中国 美国 英国 日本 韩国 德国 法国 加拿大 澳大利亚 澳洲 意大利 西班牙
    俄罗斯 印度 泰国 越南 马来西亚 新西兰 荷兰 瑞士 瑞典 挪威 丹麦 芬兰 爱尔兰 葡萄牙 希腊
    土耳其 埃及 巴西 墨西哥 阿根廷 欧洲 北美 亚洲 国外 海外 国内 老家 家乡 外地 本地 当地 湾区 硅谷
    """
)

_ZH_PLACES = tuple(
    sorted(
        _words("""
        北京 上海 广州 深圳 杭州 成都 重庆 天津 南京 武汉 西安 苏州 长沙 郑州 青岛 厦门 大连 宁波
        合肥 福州 济南 沈阳 哈尔滨 长春 昆明 贵阳 南宁 南昌 太原 石家庄 兰州 乌鲁木齐 拉萨 呼和浩特
        银川 西宁 海口 三亚 珠海 东莞 佛山 无锡 常州 温州 绍兴 嘉兴 金华 义乌 台州 扬州 徐州 南通
        香港 澳门 台北 台湾 高雄 广东 浙江 江苏 四川 湖北 湖南 河南 河北 山东 山西 陕西 福建 安徽
        江西 云南 贵州 广西 海南 辽宁 吉林 黑龙江 内蒙古 新疆 西藏 甘肃 青海 宁夏 中国 美国 英国
        日本 韩国 德国 法国 加拿大 澳大利亚 澳洲 新加坡 意大利 西班牙 俄罗斯 印度 泰国 越南 马来西亚
        新西兰 荷兰 瑞士 瑞典 挪威 丹麦 芬兰 爱尔兰 葡萄牙 希腊 土耳其 埃及 巴西 墨西哥 阿根廷 欧洲
        北美 亚洲 东京 大阪 京都 首尔 曼谷 伦敦 巴黎 柏林 纽约 洛杉矶 旧金山 西雅图 波士顿 芝加哥
        多伦多 温哥华 悉尼 墨尔本 国外 海外 国内 老家 家乡 家 家里 外地 本地 当地 外企 湾区 硅谷
        """),
        key=len,
        reverse=True,
    )
)

_EN_TOOLS_NOT_PLACES = _words(
    """linux windows mac macos osx ubuntu debian fedora arch android ios iphone ipad pixel
    python rust go golang java javascript typescript kotlin swift ruby php scala haskell
    neovim vim emacs vscode vs code intellij pycharm xcode react vue angular svelte django
    flask rails node aws gcp azure notion obsidian slack teams zoom chrome firefox safari
    edge spotify netflix minecraft roblox fortnite excel word powerpoint figma jira github
    discord twitter reddit youtube tiktok instagram facebook wechat terminal crocs jeans
    hoodies sweatpants pajamas denial"""
)

_JOB_HEADS_EN = (
    "engineer|developer|programmer|coder|designer|manager|director|teacher|tutor|professor|"
    "lecturer|doctor|physician|surgeon|nurse|dentist|pharmacist|lawyer|attorney|accountant|"
    "analyst|scientist|researcher|consultant|architect|student|intern|chef|cook|baker|"
    "barista|waiter|waitress|pilot|driver|writer|author|journalist|editor|reporter|"
    "photographer|artist|musician|actor|actress|technician|electrician|plumber|mechanic|"
    "carpenter|salesperson|marketer|recruiter|cashier|clerk|officer|administrator|"
    "executive|ceo|cto|cfo|coo|vp|founder|co-founder|cofounder|entrepreneur|freelancer|"
    "contractor|banker|trader|economist|therapist|psychologist|veterinarian|vet|librarian|"
    "specialist|coordinator|assistant|secretary|product owner|pm|scrum master|translator|"
    "interpreter|firefighter|police officer|soldier|farmer|postdoc|phd student|lead|"
    "tech lead|team lead|data scientist|sre|devops engineer|paralegal|social worker|"
    "caregiver|nanny|investor|partner|principal|dean|coach|trainer|instructor|"
    "receptionist|guide|tester|qa|illustrator|animator|counselor|counsellor|advisor|adviser|"
    "agent|broker|realtor|surveyor|inspector|auditor|operator|worker|cleaner|janitor|gardener|"
    "tailor|hairdresser|stylist|beautician|bartender|flight attendant|paramedic|optometrist|"
    "physiotherapist|physical therapist|midwife|caretaker|supervisor|apprentice|trainee|"
    "resident|fellow|curator|archivist|blogger|youtuber|streamer|influencer|podcaster|"
    "copywriter|content creator|strategist|planner|producer|screenwriter|composer|singer|"
    "dancer|athlete|referee|judge|notary|diplomat|politician|civil servant|bookkeeper|"
    "actuary|underwriter|teller|statistician|mathematician|physicist|chemist|biologist|"
    "geologist|astronomer|linguist|historian|philosopher|sociologist|economist|"
    "archaeologist|illustrator|programmer|head|chief|president|vice president|owner|"
    "associate|advocate|manager"
)
_TITLE_MODIFIER = (
    r"(?!(?:for|of|to|with|in|at|on|by|from|the|my|your|his|her|their|our|and|or|but|former|"
    r"ex|aspiring|future|wannabe|would-be|budding|retired|fan|huge|big)\b)[a-z][\w/&+.-]*"
)
_JOB_TITLE_EN = rf"(?:{_TITLE_MODIFIER}\s+){{0,3}}(?:{_JOB_HEADS_EN})s?"
_JOB_TITLE_EN_RE = re.compile(_JOB_TITLE_EN)

_JOB_HEADS_ZH = (
    "工程师|程序员|开发者|开发|设计师|经理|总监|主管|主任|老师|教师|教授|讲师|医生|大夫|护士|律师|"
    "会计师|会计|分析师|科学家|研究员|顾问|架构师|学生|研究生|博士生|本科生|硕士生|大学生|高中生|"
    "实习生|厨师|司机|作家|记者|编辑|摄影师|艺术家|音乐家|演员|技术员|电工|销售|运营|总裁|CEO|CTO|"
    "创始人|合伙人|自由职业者|公务员|警察|军人|农民|翻译|药剂师|牙医|兽医|店员|收银员|客服|文员|"
    "秘书|助理|专员|测试|产品|店长|老板|主播|博主|UP主|律师助理|教练|导游|飞行员|空姐|空乘|保安|"
    "快递员|外卖员|咨询师|心理咨询师|规划师|策划|主编|制片人|导演|画家|歌手|模特|HR|hr|PM|pm|组长|"
    "队长|负责人|专家|主理人|合伙人|研究助理|留学生|初中生|中学生|小学生|法官|检察官|医师|技师|设计|"
    "分析员|科员|职员|员工|工人|leader|Leader"
)
_JOB_TITLE_ZH = rf"[\u4e00-\u9fffA-Za-z0-9 ]{{0,10}}?(?:{_JOB_HEADS_ZH})"

_ZH_NUM = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_ZH_NUM.update({"六": 6, "七": 7, "八": 8, "九": 9})

# ---------------------------------------------------------------------------------------------
# Text preparation
# ---------------------------------------------------------------------------------------------

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_CJK = re.compile(f"[{_CJK}]")
_APOS = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_CONTRACTIONS = (
    (re.compile(r"\b(i)'m\b", re.I), r"\1 am"),
    (re.compile(r"\b(i)'ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(i)'ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(i)'d\b", re.I), r"\1 would"),
    (re.compile(r"\b(he|she)'s\b", re.I), r"\1 is"),
    (re.compile(r"\b(we|they|you)'re\b", re.I), r"\1 are"),
    (re.compile(r"\b(we|they|you)'ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(we|they|you)'ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(won)'t\b", re.I), "will not"),
    (re.compile(r"\b(can)'t\b", re.I), r"\1 not"),
    (re.compile(r"\b(\w+)n't\b", re.I), r"\1 not"),
    (re.compile(r"\bim\b(?=\s+(?:a|an|now|based|moving|going|planning|\d))", re.I), "I am"),
)
_SPACES = re.compile(r"[ \t\u00a0\u3000]+")
# Sentences: 。！？; and ASCII ones, a "." only before a space or the end ("node.js" stays).
_SENTENCE = re.compile(r"(?<=[。！？!?;；\n])|(?<=\.)(?=\s|$)|(?<=…)")
_QUOTES = re.compile(r"[\"“”《》「」『』【】<>*_~]")
# the comma that continues a name ("Hangzhou, China") is kept as this placeholder
_KEEP_COMMA = "\u201a"


def _lower(text: str) -> str:
    """Lowercase, keeping offsets into the original valid (no character may grow)."""
    low = text.lower()
    if len(low) == len(text):  # nothing grew ("İ" does): the fast, usual case
        return low
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _prepare(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_APOS)
    text = _QUOTES.sub(" ", text)
    if "'" in text or "im " in text.lower():
        for pattern, repl in _CONTRACTIONS:
            text = pattern.sub(repl, text)
    return _SPACES.sub(" ", text).strip()


# ---------------------------------------------------------------------------------------------
# Clause splitting, questions, hypotheticals
# ---------------------------------------------------------------------------------------------

_EN_CONJ_SPLIT = re.compile(
    # "and" only before a new subject or verb: "Johnson and Johnson", "sushi and ramen" stay
    r"\s*,?\s+(?i:and then|and|then|so)\s+(?=(?i:i|he|she|we|they|my|his|her|the user|user|"
    r"now|then|also|currently|recently|later|work|works|live|lives|moved|relocated|joined|"
    r"started|use|uses|like|likes|love|loves|prefer|prefers|am|is|was|have|has|got|switched|"
    r"quit|left|drink|drinks|plan|plans|will|became|turned|went)\b)"
    r"|\s*,?\s+(?i:but|while|whereas|because|though|although|which|who|where)\s+"
    r"|\s*,\s*(?=[a-z])|\s*[()]\s*|\s+-\s+"
)
_EN_SUBJ_AFTER_COMMA = re.compile(r"\s*,\s*(?=(?:I|He|She|The user|User|My|Now|But)\b)")
_ZH_SPLIT = re.compile(
    r"\s*[,，、()（）:：]\s*|(?<=[" + _CJK + r"了])(?:但是|不过|而且|并且|然后|所以|因为)"
)

_EN_QUESTION_START = re.compile(
    r"^(?:should|shall|would|could|can|do|does|did|is|are|am|will|have|has|was|were|may|"
    r"might|must)\s+(?:i|you|we|he|she|they|the user|user|it)\b|^(?:what|where|which|how|"
    r"why|when|who|whom|whose|whether)\b"
)
_ZH_QUESTION = re.compile(
    r"[吗么嘛][\s.。!]*$|要不要|是不是|会不会|能不能|该不该|可不可以|有没有|是否|去不去|搬不搬|"
    r"换不换|还是.{0,12}[呢吗]|[呢][\s.。]*$|如何|怎么样?|为什么|哪里|哪儿|什么时候"
)
_EN_HYPO = re.compile(
    r"\b(?:if|unless|whether|might|maybe|perhaps|probably|possibly|would|could|should|"
    r"wish|hope|hoping|hopefully|wonder|wondering|considering|consider|thinking (?:about|of)|"
    r"imagine|suppose|supposing|pretend|dream|dreaming|want to|wants to|wanna|"
    r"would like|let's|lets)\b|(?<!in )(?<!of )(?<!early )(?<!late )(?<!mid )(?<!mid-)"
    r"(?<!this )(?<!next )(?<!last )(?<!since )(?<!until )(?<!by )(?<!before )"
    r"(?<!after )\bmay\b(?! \d)"
)
_ZH_HYPO = re.compile(
    r"如果|假如|假设|要是|万一|倘若|若是|可能|也许|或许|大概|说不定|考虑|希望|梦想|打听|"
    r"要不|想象"
)
_EN_ALSO = re.compile(
    r"\b(?:also|too|as well|either|part[- ]time|on weekends|during the week|weekdays|"
    r"part of the year|half the (?:year|time)|in the summers?|in the winters?|sometimes|"
    r"occasionally|side job|second job|side hustle)\b"
)
_ZH_ALSO = re.compile(r"也|兼职|周末|平时|有时|偶尔|工作日|寒暑假|副业|第二份")
_EN_OTHER_PERSON = re.compile(
    r"\b(?:mom|mother|mum|dad|father|parents?|sister|brother|sibling|wife|husband|spouse|"
    r"partner|fianc[eé]e?|friend|boyfriend|girlfriend|son|daughter|kids?|child|children|"
    r"colleague|coworker|co-worker|boss|manager|neighbou?r|roommate|cousin|aunt|uncle|"
    r"grandma|grandpa|grandmother|grandfather|niece|nephew|in-laws?|family)\b"
)
_ZH_OTHER_PERSON = re.compile(
    r"妈|爸|母亲|父亲|父母|姐|妹|哥|弟|老婆|老公|妻子|丈夫|爱人|对象|朋友|同事|儿子|女儿|孩子|"
    r"男友|女友|领导|老板|邻居|室友|舅|姨|叔|伯|姑|爷爷|奶奶|外公|外婆|家人|亲戚"
)


_EN_OTHER_START = re.compile(r"(?:[\w'-]+\s+){0,2}?" + _EN_OTHER_PERSON.pattern)
_ZH_OTHER_START = re.compile(
    r"(?:和|跟|与|同|家|[\u4e00-\u9fff]{0,2}?(?:妈|爸|母亲|父亲|父母|姐|妹|哥|弟|老婆|老公|妻子|丈夫|"
    r"爱人|对象|朋友|同事|儿子|女儿|孩子|男友|女友|领导|老板|邻居|室友|舅|姨|叔|伯|姑|爷|奶|外公|外婆|"
    r"家人|亲戚|同学|闺蜜|兄弟))"
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _is_question(sentence: str, low: str) -> bool:
    if sentence.rstrip(" .。!！").endswith(("?", "？")):
        return True
    if _HAS_CJK.search(sentence):
        return bool(_ZH_QUESTION.search(low))
    return bool(_EN_QUESTION_START.search(low))


def _is_hypothetical(low: str, cjk: bool) -> bool:
    if cjk:
        return bool(_ZH_HYPO.search(low)) or bool(_EN_HYPO.search(low))
    return bool(_EN_HYPO.search(low))


def _en_clauses(sentence: str) -> list[str]:
    # a comma before a capitalised word continues a name ("Hangzhou, China"), unless that
    # word opens a new clause ("..., I moved")
    parts = _EN_SUBJ_AFTER_COMMA.split(sentence)
    out: list[str] = []
    for part in parts:
        part = _NAME_COMMA.sub(_KEEP_COMMA + " ", part)
        pos = 0
        for m in _EN_CONJ_SPLIT.finditer(part):
            out.append(part[pos : m.start()])
            pos = m.end()
        out.append(part[pos:])
    return [c.strip(" ,.;!") for c in out if c.strip(" ,.;!")]


def _zh_clauses(sentence: str) -> list[str]:
    return [c.strip(" ,.;!。！") for c in _ZH_SPLIT.split(sentence) if c.strip(" ,.;!。！")]


# ---------------------------------------------------------------------------------------------
# Leads: prefix adverbials and the subject of a clause
# ---------------------------------------------------------------------------------------------

_MONTHS = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_EN_TIME = (
    r"(?:last|this|next|earlier this|later this) (?:week|month|year|summer|spring|fall|"
    r"autumn|winter|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:a|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several|"
    r"\d+) (?:days?|weeks?|months?|years?) ago|in (?:19|20)\d\d|in " + _MONTHS + r"|"
    r"(?:back )?in " + _MONTHS + r" (?:19|20)\d\d|since (?:19|20)\d\d|today|yesterday|"
    r"recently|lately|currently|now|right now|these days|nowadays|as of (?:now|today)|"
    r"at the moment|at present|since then"
)
_EN_PREFIX = (
    r"(?:so|well|actually|btw|by the way|anyway|ok|okay|oh|also|and|but|then|finally|"
    r"officially|update|news|fyi|remember(?: that)?|(?:please )?note(?: that)?|"
    r"just so you know|for the record|keep in mind(?: that)?|"
    r"(?P<fut>next (?:week|month|year|summer|spring|fall|autumn|"
    r"winter|weekend)|tomorrow|soon|later this (?:week|month|year)|in (?:a|one|two|three|a few|"
    r"several|\d+) (?:days?|weeks?|months?|years?))|"
    + _EN_TIME
    + r"|(?P<chg>from now on|going forward|starting (?:today|now|this week|this month|"
    r"next week|next month)|from today on|from today onwards?)|"
    r"(?:when it comes to|as for|as far as|regarding) (?P<topic>[a-z][\w' -]{0,30}?)"
    r"(?: (?:goes|is concerned))?)"
)
_EN_LEAD = re.compile(
    rf"^(?:(?:{_EN_PREFIX})[\s,:{_KEEP_COMMA}-]+)*"
    r"(?:(?P<subj>i|the user|user|he|she|we)\s+|(?P<poss>my|the user's|user's|his|her|our)\s+)?"
)
_EN_PREFIX_ONLY = re.compile(rf"^(?:(?:{_EN_PREFIX})[\s,:{_KEEP_COMMA}-]*)+$")

_ZH_TIME_PAST = (
    r"(?:[今去前上这本][个]?(?:年|月|周|星期|礼拜|天)(?:初|底|中|末)?|(?:19|20)\d\d年(?:\d{1,2}月)?|"
    r"\d{1,2}月(?:份|初|底|中)?|[一二三四五六七八九十]{1,3}月(?:份|初|底|中)?|前段时间|前阵子|不久前|"
    r"前不久|这段时间|最近|刚刚|刚才|刚|今天|昨天|前天|上周末|现在|目前|如今|年初|年底)"
)
_ZH_TIME_FUTURE = (
    r"(?:[下明后][个]?(?:年|月|周|星期|礼拜|天)(?:初|底|中|末)?|明天|后天|下周末|过几天|过段时间|"
    r"年后|节后|春节|国庆|暑假|寒假|周末)"
)
_ZH_ADV = (
    rf"(?:{_ZH_TIME_PAST}|已经|已|还|又|一直|都|就|才|终于|正式|真的|确实|其实|总算|顺利|成功|"
    r"开始|从此|依然|仍然|仍|主要|平时|一般|通常|每天|天天)"
)
_ZH_PREFIX = (
    rf"(?:{_ZH_TIME_PAST}|(?P<fut>{_ZH_TIME_FUTURE})|其实|不过|但是|但|而且|所以|然后|后来|另外|对了|嗯|哦|"
    r"(?:请)?记住|记一下|备注|顺便说一下|"
    r"(?P<chg>以后|今后|从现在开始|从现在起|从今以后|从今天开始|从今天起|从此以后|往后)|"
    r"(?P<topic>[\u4e00-\u9fffa-z0-9 ]{1,8}?)(?:的话|方面|这块|这一块|这方面))"
)
_ZH_LEAD = re.compile(
    rf"^(?:{_ZH_PREFIX}[\s,，]*)*"
    r"(?:(?P<poss>我的|用户的|该用户的|他的|她的|我们的)|(?P<subj>我们|我(?![们的])|该用户|用户|他(?![们的])|"
    r"她(?![们的])))?"
)
_ZH_PREFIX_ONLY = re.compile(rf"^(?:{_ZH_PREFIX}[\s,，]*)+$")


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

_EN_STOP = (
    r"with|for|since|last|this|next|in|on|at|from|because|as|but|so|after|before|until|tonight|"
    r"till|during|when|while|where|which|who|whom|recently|now|already|anymore|any more|"
    r"again|too|also|ago|yesterday|today|tomorrow|currently|these days|nowadays|"
    r"permanently|for good|full-time|full time|part-time|remotely|together|alone|"
    r"instead|though|although|right now|lately|every|each|mostly|usually|often|daily|"
    r"weekly|a few|a couple|about|around|over|rather than|than|to|via|by|through|"
    r"thanks|lol|haha|!|:|-|(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|"
    r"a couple of|several) (?:years?|months?|weeks?|days?|hours?)"
)
_V = r"[^,;!?()]+?"  # a lazily captured value; its end is given by _END
_END = rf"(?=\s+(?:{_EN_STOP})\b|\s+(?:{_EN_STOP})$|\s*$)"
_STRICT_END = r"(?:\s+(?:now|anymore|any more|already|too|again|instead|though|then))*\s*$"

_ARTICLE = re.compile(r"^(?:the|a|an|my|our|some|this|that)\s+")
_EN_TRAILING = re.compile(
    r"(?:\s+(?:now|already|too|again|anymore|any more|instead|though|then|lol|haha|"
    r"these days|nowadays|currently|at the moment|right now))+$"
)
_ZH_TRAILING = re.compile(r"(?:了|啦|呀|啊|哦|呢|吧|的|咯|喽|嘛|~|\.|。|！|!)+$")
_VALUE_JUNK = re.compile(r"[\s\"'“”‘’《》「」『』【】()（）<>*_~.。,，、!！?？]+$")
_LIST_MARK = re.compile(r"\band\b|\bor\b|&|/|、|和|与|跟|及|以及|或者|或|" + _KEEP_COMMA)
_PRONOUN_VALUES = _words(
    "it this that them these those there here him her me myself yourself himself herself "
    "one ones something anything everything nothing stuff things 它 这 那 这个 那个 它们 他们 "
    "她们 自己 你 你们 您 大家"
)
_ALIASES = {
    "nyc": "new york",
    "new york city": "new york",
    "sf": "san francisco",
    "la": "los angeles",
    "the us": "united states",
    "usa": "united states",
    "us": "united states",
    "the usa": "united states",
    "the uk": "united kingdom",
    "uk": "united kingdom",
    "favorite": "favourite",
    "film": "movie",
    "films": "movie",
    "movies": "movie",
    "vscode": "vs code",
    "colour": "color",
    "colours": "color",
    "colors": "color",
    "visual studio code": "vs code",
}


def _norm(value: str) -> str:
    """A value as compared: NFKC, casefolded, articles and particles stripped."""
    v = unicodedata.normalize("NFKC", value).casefold().replace(_KEEP_COMMA, ",")
    v = _QUOTES.sub(" ", v)
    v = _SPACES.sub(" ", v).strip(" ,.;:!?'\"-")
    for _ in range(3):  # until nothing more comes off ("the ... now." -> "...")
        before = v
        v = _ARTICLE.sub("", v)
        v = _EN_TRAILING.sub("", v)
        v = _ZH_TRAILING.sub("", v).strip()
        v = _VALUE_JUNK.sub("", v).strip(" ,.;:!?'\"-")
        if v == before:
            break
    # spaces between CJK characters carry nothing
    v = _CJK_GAP.sub("", v)
    return _ALIASES.get(v, v)


def _is_cjk(value: str) -> bool:
    return bool(_HAS_CJK.search(value))


_TOKEN = re.compile(rf"[a-z0-9]+|[{_CJK}]")


def _tokens(value: str) -> list[str]:
    return _TOKEN.findall(value)


def _contains(big: str, small: str) -> bool:
    """`big` says at least what `small` says: equal, a CJK substring or a superset of words."""
    if not big or not small:
        return False
    if big == small:
        return True
    if _is_cjk(big) != _is_cjk(small):
        return False
    if _is_cjk(big):
        return small.replace(" ", "") in big.replace(" ", "")
    words = set(_tokens(big))
    return bool(_tokens(small)) and set(_tokens(small)) <= words


def _same(a: str, b: str) -> bool:
    """Not known to differ: one contains the other, or they can't be compared (scripts)."""
    if not a or not b:
        return True
    if _is_cjk(a) != _is_cjk(b):
        return True
    return _contains(a, b) or _contains(b, a)


def _names(old_value: str, named: str) -> bool:
    """An old value is the one a switch/cancellation names (the old may be more specific)."""
    if not old_value or not named:
        return False
    if old_value == named:
        return True
    if _LIST_MARK.search(old_value):
        return False  # "python and rust" is not retired by "no longer use rust"
    if _is_cjk(named) and len(named.replace(" ", "")) < 2:
        return False
    return _contains(old_value, named)


def _is_region(value: str) -> bool:
    """A country, province, state or vague region rather than a city."""
    if _is_cjk(value):
        return _ZH_REGION_SUFFIX.sub("", value) in _ZH_REGIONS
    return value.split(",")[0].strip() in _EN_REGIONS


def _overlap(a: str, b: str) -> bool:
    if not a or not b:
        return False
    if _is_cjk(a) and _is_cjk(b) and min(len(a), len(b)) < 2:
        return a == b
    return _contains(a, b) or _contains(b, a)


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Clause:
    text: str  # the clause as written (NFKC), for capitalisation
    low: str  # lowercased, same offsets
    rest: int  # where the text after the lead (prefixes, subject) starts
    chg: bool  # "from now on", "以后": a change marker
    topic: str  # "when it comes to coffee", "咖啡的话"
    all_lower: bool  # the whole memory has no capital letter: don't ask for one


@dataclass(frozen=True)
class _Rule:
    slot: str  # a fixed slot, or a family whose slot the builder completes
    lead: str  # "subj", "poss" or "free"
    triggers: frozenset[str]  # a cheap test: the rule is tried only when one of these occurs
    pattern: re.Pattern[str]
    build: str  # how the match becomes a frame (see _build)


def _r(slot: str, lead: str, triggers: str, pattern: str, build: str) -> _Rule:
    """A rule: tried on a clause only when one of its `|`-separated trigger strings occurs."""
    return _Rule(slot, lead, frozenset(triggers.split("|")), re.compile(pattern), build)


_ADV = (
    r"(?:(?:now|currently|still|just|recently|finally|officially|actually|already|"
    r"permanently|eventually|happily|newly|really|do|does)\s+)*"
)
_NOW = r"(?:(?:now|currently|still|just|recently|finally|officially|already)\s+)*"
_TRAVEL = (
    r"(?:business trip|road trip|ski trip|trip|vacation|holiday|holidays|visit|journey|"
    r"honeymoon|getaway|tour|travel|travels|flight|flights|vacay|trek)"
)
_TRAVEL_ADJ = (
    r"(?:(?:big|little|short|long|quick|family|solo|summer|winter|spring|autumn|fall|weekend|"
    r"upcoming|planned|next|[\w]+-(?:day|week|month)|\d+-(?:day|week))\s+)?"
)
_GO = (
    r"(?:go|going|travel|traveling|travelling|fly|flying|head|heading|visit|visiting|"
    r"move|moving|return|returning|run|running|attend|attending)"
)
_EVENT = (
    r"(?:festival|concert|wedding|marathon|half marathon|conference|gig|tournament|race|"
    r"exhibition|expo|retreat|reunion|summit|hackathon|recital|ceremony|triathlon|trek|"
    r"music festival|jazz festival|film festival)"
)
_EVENT_VALUE = re.compile(rf"^(?:(?:a|an|the|my|our)\s+)?(?:[\w'&-]+\s+){{0,3}}?{_EVENT}$")
_DIET = r"(?P<v>vegetarian|vegan|pescatarian|pescetarian|veggie|plant-based)"
_DIET_ANY = (
    r"(?P<v>vegetarian|vegan|pescatarian|pescetarian|plant-based|keto|ketogenic|paleo|"
    r"mediterranean|low-carb|low carb|atkins|whole30|carnivore|intermittent fasting)"
)
_REL = r"(?P<v>single|married|engaged|divorced|widowed)"
_REL_END = (
    r"(?:\s+(?:to|with)\s+[^,;]+?)?(?:\s+(?:last|this) \w+|\s+\w+ (?:days?|weeks?|months?|"
    r"years?) ago|\s+in (?:19|20)\d\d|\s+recently|\s+now|\s+again|\s+already)?\s*$"
)

# Small patterns the functions below use (compiled once, like every other).
_NAME_COMMA = re.compile(r",\s*(?=[A-Z0-9])")
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])")
_ZH_REGION_SUFFIX = re.compile(r"(?:省|地区|自治区)$")
_LEADING_ARTICLE = re.compile(r"(?:the|a|an)\s+", re.I)
_FIRST_WORD = re.compile(r"[\w.+-]+")
_NAME_WORD = re.compile(r"[^\s,\u201a]+")
_INDEFINITE = re.compile(r"(?:a|an|some|another|one)\s")
_ZH_VALUE_LEAD = re.compile(r"^(?:了|到|在|去|是)+")
_ZH_PLACE_SUFFIX = re.compile(r"[市省县镇村]$|[\u4e00-\u9fff]区$")
_A_AN = re.compile(r"(?:a|an)\s")
_FOR_TO = re.compile(r"\b(?:for|to join|to)\b")
_NOT_A_NAME = re.compile(r"(?:not|no|none|secret|private|unknown)\b|[他她你它不没]")
_NON_DIGIT = re.compile(r"\D")
_ZH_VERB_LEAD = re.compile(r"^(?:用|喝|吃|看|听|玩|读)+")
_NOUN_TAIL = re.compile(r"\s+(?:of all time|ever|right now|at the moment|these days)$")
_PLURAL_S = re.compile(r"(?<=[a-z]{3}[^siu])s$")  # "movies", not "analysis" or "bus"
_GERUND_LEAD = re.compile(r"^(?:using|drinking|eating|playing|taking|smoking)\s+")
_EVENT_RE = re.compile(_EVENT)
_ZH_EMPLOYER_HINT = re.compile(r"公司|集团|银行|科技|字节|阿里|腾讯|百度|华为|京东|美团")
_ZH_THIS_ONE = re.compile(r"(?:这家|那家)$")
_ZH_NOT_A_WORKPLACE = re.compile(r"家里|公司里|单位里|这里|那里|附近|楼下|远程|线上|网上")
_ZH_NOT_A_TOOL = re.compile(r"^(?:了|过|着|完|掉|上|到|于|来|去|手|心|力|钱|时间)")
_ZH_NOT_A_HABIT = re.compile(r"^(?:了|过|着|去|来|再|上|担心|客气|谢)")
_ZH_NOT_A_TRIP = re.compile(r"^(?:的|了|过|看|做|买|吃|睡|上班|工作|学习|那里|这里|哪)")
_ZH_PERSON_CHAR = re.compile(r"[我你他她们]")
_NOT_AN_OBJECT = re.compile(
    r"\s*(?:at|by|in|to|my|our|his|her|the|on|up|for|with|from|job|work|working|being)\s"
)


_EN_RULES: tuple[_Rule, ...] = (
    # --- residence ------------------------------------------------------------------------
    _r(
        "residence",
        "subj",
        "liv|resid|based|settled",
        rf"^{_ADV}(?:live|lives|reside|resides|(?:am|is|have been|has been)\s+{_ADV}"
        rf"(?:living|residing|based|settled)|(?:have|has)\s+{_ADV}settled|based|"
        rf"settled(?: down)?)\s+in\s+(?P<v>{_V}){_END}",
        "place",
    ),
    _r(
        "residence",
        "subj",
        "lived",
        # "I've lived in Berlin since 2020" (but "I've lived in Paris" may be long ago)
        rf"^{_ADV}(?:have|has)\s+{_ADV}lived\s+in\s+(?P<v>{_V})(?=\s+(?:since|for)\b)",
        "place",
    ),
    _r(
        "residence",
        "subj",
        "moved|relocated",
        rf"^{_ADV}(?:have |has )?{_NOW}(?P<verb>moved|relocated|moved back|moved house|"
        rf"moved over|relocated back)(?:\s+from\s+(?P<p>{_V}))?\s+to\s+(?P<v>{_V})"
        rf"(?:\s+from\s+(?P<p2>{_V}))?{_END}",
        "moved",
    ),
    _r(
        "residence",
        "subj",
        "liv|moved|based|resid",
        rf"^{_ADV}(?:do not live|does not live|no longer live|no longer lives|"
        rf"am no longer living|is no longer living|am not living|is not living|"
        rf"am no longer based|is no longer based|used to live|have moved out of|"
        rf"has moved out of|moved out of|moved away from|have moved away from|"
        rf"has moved away from)\s+(?:in\s+)?(?P<v>{_V}){_STRICT_END}",
        "cancel_place",
    ),
    # --- employer / job title ---------------------------------------------------------------
    _r(
        "employer",
        "subj",
        "work|employed",
        rf"^{_ADV}(?:work|works|am working|is working|have been working|has been working|"
        rf"am employed|is employed)\s+(?:as\s+(?:a |an |the )?(?P<t>{_V})\s+)?"
        rf"(?:in\s+(?:sales|marketing|finance|hr|it|engineering|research|design|product|"
        rf"operations|support|legal|accounting|management|data science|the \w+ team)\s+)?"
        rf"(?:at|for|by)\s+(?P<v>{_V}){_END}",
        "employer",
    ),
    _r(
        "employer",
        "subj",
        "job|position|role|work|hired|offer",
        rf"^{_ADV}(?:have |has )?{_NOW}(?:started|began|got|landed|accepted|took|taken|"
        rf"gotten|start|starting)\s+(?:a |an |my |the )?(?:new |first )?"
        rf"(?:full-time |part-time |permanent )?(?:job|position|role|work|working|gig)\s+"
        rf"(?:as\s+(?:a |an |the )?(?P<t>{_V})\s+)?(?:at|with)\s+(?P<v>{_V}){_END}",
        "employer_chg",
    ),
    _r(
        "employer",
        "subj",
        "hired",
        rf"^{_ADV}(?:was |were |got |have been |has been )?{_NOW}hired\s+"
        rf"(?:as\s+(?:a |an |the )?(?P<t>{_V})\s+)?(?:at|by)\s+(?P<v>{_V}){_END}",
        "employer_chg",
    ),
    _r(
        "employer",
        "subj",
        "joined",
        rf"^{_ADV}(?:have |has )?{_NOW}joined\s+(?P<v>{_V})\s+as\s+(?:a |an |the )?"
        rf"(?P<t>{_V}){_END}",
        "employer_chg",
    ),
    _r(
        "employer",
        "subj",
        "switched|changed|moved",
        rf"^{_ADV}(?:have |has )?{_NOW}(?:switched|changed|moved) (?:jobs|companies|employers)"
        rf"\s+(?:and (?:am|is) now at |to )(?P<v>{_V}){_END}",
        "employer_chg",
    ),
    _r(
        "employer",
        "poss",
        "employer|company|job",
        rf"^(?:new |current )?(?:employer|company|job|workplace)\s+is\s+(?:now\s+)?"
        rf"(?:at\s+)?(?P<v>{_V}){_END}",
        "employer",
    ),
    _r(
        "employer",
        "subj",
        "quit|left|resign|laid off|fired|work|leaving",
        rf"^{_ADV}(?:have |has )?(?:just |recently )?(?:quit|left|resigned from|"
        rf"was laid off (?:from|by)|got laid off (?:from|by)|have been laid off (?:from|by)|"
        rf"was fired (?:from|by)|got fired (?:from|by)|no longer work (?:at|for)|"
        rf"no longer works (?:at|for)|do not work (?:at|for)|does not work (?:at|for)|"
        rf"stopped working (?:at|for)|used to work (?:at|for)|am no longer (?:at|with|"
        rf"working (?:at|for))|is no longer (?:at|with|working (?:at|for))|am not working "
        rf"(?:at|for))\s+(?:my (?:job|position|role) at\s+)?(?P<v>{_V})"
        rf"(?:\s+(?:last|this) \w+|\s+\w+ (?:days?|weeks?|months?|years?) ago)?"
        rf"{_STRICT_END}",
        "cancel_employer",
    ),
    _r(
        "employer",
        "subj",
        "left|quit",
        rf"^{_ADV}(?:have |has )?{_NOW}(?:left|quit)\s+(?P<p>{_V})\s+(?:for|to join)\s+"
        rf"(?P<v>{_V}){_END}",
        "employer_left_for",
    ),
    _r(
        "job_title",
        "subj",
        " as ",
        rf"^{_ADV}(?:work|works|am working|is working|have been working|has been working|"
        rf"started working|started work|am employed|is employed)\s+as\s+(?:a |an |the )?"
        rf"(?P<t>{_V}){_END}",
        "title",
    ),
    _r(
        "job_title",
        "subj",
        "am |is |became|become",
        rf"^(?:am|is|have become|has become|became)\s+{_NOW}(?:a |an )(?P<t>{_JOB_TITLE_EN})"
        rf"(?:\s+(?:at|for|with)\s+(?P<v>{_V}))?{_END}",
        "title_allow",
    ),
    _r(
        "job_title",
        "subj",
        "promoted",
        rf"^{_ADV}(?:was |got |have been |has been |have got |just got )?{_NOW}promoted\s+to\s+"
        rf"(?:a |an |the )?(?:(?:position|role|rank) of\s+)?(?P<t>{_V}){_END}",
        "title_chg",
    ),
    _r(
        "job_title",
        "poss",
        "title|role|position|job|occupation|profession",
        rf"^(?:new |current )?(?:job title|title|role|position|job|occupation|profession)\s+is"
        rf"\s+(?:now\s+)?(?:a |an )?(?P<t>{_JOB_TITLE_EN}){_END}",
        "title_allow",
    ),
    # --- diet, relationship, name, age, things ------------------------------------------------
    _r(
        "diet",
        "subj",
        "veg|pesc|plant",
        rf"^(?:am|is|have become|has become|became|went|have gone|has gone|turned|eat|"
        rf"have been|has been)\s+{_NOW}(?:a |an |fully |strictly |strict |completely )?"
        rf"{_DIET}{_STRICT_END}",
        "diet",
    ),
    _r(
        "diet",
        "subj",
        "veg|pesc|plant",
        rf"^(?:am|is)\s+(?:not|no longer)\s+(?:a |an )?{_DIET}(?:\s+(?:anymore|any more))?"
        rf"\s*$|^(?:stopped|quit) being\s+(?:a |an )?{_DIET.replace('<v>', '<v2>')}\s*$",
        "cancel_diet",
    ),
    _r(
        "relationship",
        "subj",
        "single|married|engaged|divorced|widowed",
        rf"^(?:am|is|got|have gotten|has gotten|just got|recently got)\s+{_NOW}"
        rf"(?:happily |newly |officially )?{_REL}{_REL_END}",
        "relationship",
    ),
    _r(
        "relationship",
        "subj",
        "dating|relationship|broke up",
        r"^(?:am|is) (?:now )?(?:in a relationship|dating someone|seeing someone)"
        r"(?:\s+with\s+[^,;]+)?\s*$|^(?P<bu>broke up|have broken up|has broken up)"
        r"(?:\s+with\s+[^,;]+)?\s*$",
        "relationship_dating",
    ),
    _r(
        "name",
        "poss",
        "name",
        r"^(?:full |real |first )?name\s+is\s+(?P<v>[^\s,;]+(?:\s+[^\s,;]+){0,2}?)\s*$",
        "name",
    ),
    _r(
        "name",
        "subj",
        "called|go by",
        r"^(?:am|is)\s+called\s+(?P<v>[^\s,;]+(?:\s+[^\s,;]+){0,2}?)\s*$",
        "name",
    ),
    _r(
        "age",
        "subj",
        "am |is |turned",
        r"^(?:am|is|just turned|turned|have turned|has turned|recently turned)\s+"
        r"(?P<v>\d{1,3})(?:\s+years?\s+old|\s+yo|\s+years? of age)?"
        r"(?:\s+(?:last|this) \w+|\s+today|\s+yesterday|\s+now)?\s*$",
        "age",
    ),
    _r(
        "age",
        "poss",
        "age",
        r"^age\s+is\s+(?:now\s+)?(?P<v>\d{1,3})\s*$",
        "age",
    ),
    _r(
        "phone",
        "poss",
        "phone|car|laptop|mobile",
        rf"^(?:new |current )?(?P<k>phone number|cell number|mobile number|phone|cell phone|"
        rf"mobile|smartphone|car|laptop)\s+is\s+(?:now\s+)?(?:a |an |the )?(?P<v>{_V}){_END}",
        "thing",
    ),
    # --- favourites and usage -----------------------------------------------------------------
    _r(
        "favourite",
        "poss",
        "favo|go-to|fav ",
        rf"^(?:new |current |all-time |absolute |very )?(?:favou?rite|fav|go-to|preferred)\s+"
        rf"(?P<n>[a-z][\w' -]{{0,30}}?)\s+(?:is|has become|became)\s+(?:now\s+)?"
        rf"(?P<v>{_V}){_END}",
        "favourite",
    ),
    _r(
        "favourite",
        "free",
        "my favo|my go-to|my new favo",
        r"^(?P<v>[^,;!?()]+?)\s+(?:is|has become|became)\s+(?:now\s+)?my\s+"
        r"(?:new\s+|current\s+|all-time\s+)?(?:favou?rite|go-to)\s+(?P<n>[a-z][\w' -]{0,30}?)"
        r"(?:\s+(?:now|these days|nowadays))?\s*$",
        "favourite",
    ),
    _r(
        "favourite",
        "subj",
        "prefer",
        rf"^{_ADV}(?:prefer|prefers|have come to prefer)\s+(?!to\s|not\s)(?P<v>{_V})\s+"
        rf"(?:for|when it comes to)\s+(?P<n>{_V}){_END}",
        "favourite",
    ),
    _r(
        "usage",
        "subj",
        "prefer",
        rf"^{_ADV}(?:prefer|prefers)\s+(?!to\s|not\s|being\s)(?P<v>{_V})"
        rf"(?:\s+(?:over|to|rather than)\s+{_V})?{_END}",
        "prefer",
    ),
    _r(
        "usage",
        "subj",
        "instead of",
        rf"^{_ADV}(?:(?:am|is|have been|has been)\s+)?{_NOW}(?:use|uses|using|drink|drinks|"
        rf"drinking|prefer|prefers|go with|going with|went with|chose|picked|choose|run|"
        rf"runs|running|drive|drives|driving|play|plays|playing)\s+(?P<v>{_V})\s+"
        rf"(?:now\s+)?instead of\s+(?:using\s+|drinking\s+)?(?P<p>{_V})"
        rf"(?:\s+(?:for|to)\s+(?P<n>{_V}))?{_STRICT_END}",
        "switch",
    ),
    _r(
        "usage",
        "subj",
        "switch|chang|migrat|moved|convert|transition|upgrad|went|gone|replac",
        rf"^{_ADV}(?:have |has )?{_NOW}(?:switched|changed|migrated|moved|converted|"
        rf"transitioned|upgraded|gone|went)\s+(?:over\s+)?from\s+(?:using\s+)?(?P<p>{_V})\s+to"
        rf"\s+(?:using\s+)?(?P<v>{_V})(?:\s+(?:for|to)\s+(?P<n>{_V}))?{_END}",
        "switch",
    ),
    _r(
        "usage",
        "subj",
        "switch|migrat",
        rf"^{_ADV}(?:have |has )?{_NOW}(?:switched|migrated)\s+(?:over\s+)?to\s+"
        rf"(?:using\s+)?(?P<v>{_V})(?:\s+from\s+(?:using\s+)?(?P<p>{_V}))?"
        rf"(?:\s+(?:for|to)\s+(?P<n>{_V}))?{_END}",
        "switch",
    ),
    _r(
        "usage",
        "subj",
        "replac|ditch|gave up|swapp",
        rf"^{_ADV}(?:have |has )?{_NOW}(?:replaced|swapped)\s+(?P<p>{_V})\s+(?:with|for)\s+"
        rf"(?P<v>{_V}){_END}|^{_ADV}(?:have |has )?{_NOW}(?:ditched|gave up|dropped|traded)"
        rf"\s+(?P<p2>{_V})\s+for\s+(?P<v2>{_V}){_END}",
        "switch",
    ),
    _r(
        "favourite",
        "subj",
        " as ",
        rf"^{_ADV}(?:(?:am|is)\s+)?{_NOW}(?:use|uses|using|have been using|has been using)\s+"
        rf"(?P<v>{_V})\s+as\s+(?:(?:my|their|his|her|the|a)\s+)?(?:main|primary|default|preferred|"
        rf"go-to|only|daily|everyday|favou?rite)\s+(?P<n>[a-z][\w' -]{{0,30}}?){_STRICT_END}",
        "favourite",
    ),
    _r(
        "diet",
        "subj",
        "diet|keto|paleo|carb|vegan|vegetarian|mediterranean|fasting",
        rf"^(?:(?:am|is)\s+)?{_NOW}(?:on|following|follow|follows|eating|eat|eats|doing|do|does|"
        rf"started|start|have started|has started|switched to|have switched to|has switched to|"
        rf"went|have gone|has gone)\s+(?:a |an |the )?(?:strict |mostly |fully )?{_DIET_ANY}"
        rf"(?:\s+(?:diet|food|meals|eating|lifestyle))?{_STRICT_END}",
        "diet_any",
    ),
    _r(
        "usage",
        "subj",
        "use|drink|drive|using|play",
        rf"^{_ADV}(?:(?:mainly|mostly|usually|always|only|primarily|exclusively|will|"
        rf"daily)\s+)*(?:use|uses|am using|is using|have been using|has been using|drink|drinks|"
        rf"drive|drives|play|plays)\s+(?!(?:to|it|not|on|at|in|for|with|by)\b)(?P<v>{_V})"
        rf"(?:\s+(?:for|to)\s+(?P<n>{_V}))?{_END}",
        "use",
    ),
    _r(
        "usage",
        "subj",
        "use|using|drink|quit|stopped|gave up|ditched|dropped|no longer",
        rf"^{_ADV}(?:have |has )?(?:no longer use|no longer uses|no longer drink|"
        rf"no longer drinks|stopped using|quit using|stopped drinking|quit drinking|"
        rf"gave up using|gave up drinking|have stopped using|has stopped using|"
        rf"am no longer using|is no longer using|used to use|used to drink|"
        rf"stopped playing|quit playing|no longer play|no longer plays)\s+(?P<v>{_V})"
        rf"(?:\s+(?:for|to)\s+(?P<n>{_V}))?{_STRICT_END}"
        rf"|^{_ADV}(?:do not|does not|am not|is not)\s+(?:use|drink|play|using|drinking|"
        rf"playing)\s+(?P<v2>{_V})\s+(?:anymore|any more)\s*$"
        rf"|^{_ADV}(?:have |has )?(?P<bare>stopped|quit|gave up|given up|ditched|dropped)\s+"
        rf"(?P<v3>{_V})(?:\s+(?:last|this) \w+|\s+\w+ (?:days?|weeks?|months?|years?) ago)?"
        rf"{_STRICT_END}",
        "cancel_usage",
    ),
    _r(
        "like",
        "subj",
        "like|love|enjoy|into|fan",
        rf"^{_ADV}(?:really\s+|absolutely\s+)?(?:like|likes|love|loves|enjoy|enjoys|am into|"
        rf"is into|am a (?:big |huge )?fan of|is a (?:big |huge )?fan of)\s+"
        rf"(?!to\s|it\b|that\b|this\b)(?P<v>{_V}){_END}",
        "like",
    ),
    _r(
        "like",
        "subj",
        "like|love|enjoy|into|fan",
        rf"^{_ADV}(?:do not|does not)\s+(?:like|love|enjoy)\s+(?P<v>{_V})\s+"
        rf"(?:anymore|any more)\s*$|^{_ADV}(?:no longer|used to)\s+(?:like|likes|love|loves|"
        rf"enjoy|enjoys)\s+(?P<v2>{_V}){_STRICT_END}|^{_ADV}stopped\s+(?:liking|loving|"
        rf"enjoying)\s+(?P<v3>{_V}){_STRICT_END}|^(?:am|is)\s+(?:no longer|not)\s+"
        rf"(?:into|a fan of)\s+(?P<v4>{_V})(?:\s+(?:anymore|any more))?\s*$",
        "cancel_like",
    ),
    # --- plans --------------------------------------------------------------------------------
    _r(
        "plan",
        "subj",
        "plan|organi|book|going|go |travel|fly|head|visit|will|shall",
        rf"^{_ADV}(?:(?:am|is|are)\s+)?{_NOW}(?:planning|organizing|organising|booking|taking|"
        rf"going on)\s+(?:a |an |my |the |our )?{_TRAVEL_ADJ}{_TRAVEL}\s+to\s+(?P<v>{_V})"
        rf"{_END}|^{_ADV}(?:(?:am|is|are)\s+)?(?:planning|going|about)\s+(?:to|on)\s+{_GO}\s+"
        rf"(?:to\s+)?(?P<v2>{_V}){_END}|^{_ADV}(?:plan|plans|intend|intends|have planned|"
        rf"has planned)\s+(?:to|on)\s+{_GO}\s+(?:to\s+)?(?P<v3>{_V}){_END}"
        rf"|^{_ADV}(?:will|shall)\s+(?:be\s+)?(?:go|going|travel|traveling|travelling|fly|"
        rf"flying|visit|visiting|head|heading)(?:\s+to)?\s+(?P<v4>{_V}){_END}"
        rf"|^{_ADV}(?:am|is|are)\s+(?:going|travelling|traveling|flying|heading|off)\s+to\s+"
        rf"(?P<v5>{_V}){_END}|^{_ADV}(?:have |has )?booked\s+(?:a |an |my |the |our )?"
        rf"{_TRAVEL_ADJ}(?:{_TRAVEL}|tickets?|hotel|a hotel)\s+(?:to|for|in)\s+(?P<v6>{_V})"
        rf"{_END}|^(?:have|has)\s+(?:a |an )?{_TRAVEL_ADJ}{_TRAVEL}\s+to\s+(?P<v7>{_V})\s+"
        rf"(?:planned|coming up|booked|scheduled)",
        "plan",
    ),
    _r(
        "plan",
        "subj",
        "instead of",
        rf"^{_ADV}(?:(?:am|is|will|will be|am going to|is going to|decided to|have decided to|"
        rf"has decided to|plan to|am planning to|is planning to)\s+)?{_NOW}{_GO}\s+(?:to\s+)?"
        rf"(?P<v>{_V})\s+instead of\s+(?:going to\s+|visiting\s+)?(?P<p>{_V}){_STRICT_END}",
        "plan_instead",
    ),
    _r(
        "plan",
        "subj",
        "cancel|call|scrap|drop|abandon|gave up|given up|pulled|withdr|backed|skip|attend",
        rf"^{_ADV}(?:have |has |had to |have to |has to )?{_NOW}(?:cancell?ed|cancel|called off|"
        rf"call off|scrapped|dropped|abandoned|gave up on|given up on)\s+(?:my |the |our |a |"
        rf"their )?(?:(?P<o>[^\s,;]+(?:\s+[^\s,;]+)?)\s+)?"
        rf"{_TRAVEL_ADJ}(?:{_TRAVEL}|plans?|booking|tickets?)(?:\s+(?:to|for|in)\s+"
        rf"(?:go\s+to\s+|visit\s+|travel\s+to\s+|fly\s+to\s+)?(?P<v>{_V}))?{_END}"
        rf"|^{_ADV}(?:have |has )?{_NOW}(?:pulled out of|withdrew from|withdrawn from|"
        rf"dropped out of|backed out of|skipped|am skipping|is skipping|will skip|"
        rf"will not attend|will not be attending|am not attending|is not attending)\s+"
        rf"(?:the |my |our |their )?(?P<v2>{_V}){_STRICT_END}",
        "plan_cancel",
    ),
    _r(
        "plan",
        "free",
        "forget",
        rf"^forget\s+(?:about\s+)?(?:the |my |our )?(?:(?P<o>[^\s,;]+(?:\s+[^\s,;]+)?)\s+)?"
        rf"{_TRAVEL_ADJ}{_TRAVEL}(?:\s+to\s+(?P<v>{_V}))?\s*$",
        "plan_cancel",
    ),
    _r(
        "plan",
        "poss",
        " off|cancel|called off|scrapped|not happening",
        rf"^(?:the |our )?(?:(?P<o>[^\s,;]+(?:\s+[^\s,;]+)?)\s+)?{_TRAVEL_ADJ}{_TRAVEL}"
        rf"(?:\s+(?:to|for)\s+(?P<v>{_V}))?\s+(?:(?:is|was|has been|got|is now|have been|are)\s+"
        rf"(?:now\s+)?(?:off|cancell?ed|called off|scrapped|not happening|dead)|cancell?ed|"
        rf"called off|scrapped)"
        rf"(?:\s+(?:now|then|after all))?\s*$",
        "plan_cancel",
    ),
    _r(
        "plan",
        "subj",
        "not|no longer|decided",
        rf"^{_ADV}(?:am|is|are)\s+(?:not|no longer)\s+(?:going|travelling|traveling|flying|heading|"
        rf"visiting)\s+(?:to\s+)?(?P<v>{_V})(?:\s+(?:anymore|any more|after all))?\s*$"
        rf"|^{_ADV}(?:will not|am not going to|is not going to|decided not to|have decided "
        rf"not to|has decided not to|no longer plan to|no longer plans to|do not plan to|"
        rf"does not plan to)\s+(?:go|travel|fly|head|visit)\s+(?:to\s+)?(?P<v2>{_V})"
        rf"(?:\s+(?:anymore|any more|after all))?\s*$",
        "plan_cancel",
    ),
)


_ZV = r"[^,，;；!！?？、()（）。]+?"  # a lazily captured Chinese-text value
_ZDUR = (
    r"(?:(?:已经|快|有|差不多|将近|大概)?[\d一二三四五六七八九十两半几]+(?:个)?多?"
    r"(?:年|月|星期|周|天|礼拜)多?(?:了)?)"
)
_ZTAIL = rf"(?:{_ZDUR}|了|啦|呀|啊|哦|呢|吧|咯|喽|嘛|~|\s)*$"
_ZADV = rf"(?:{_ZH_ADV})*"

_ZH_RULES: tuple[_Rule, ...] = (
    # --- residence ------------------------------------------------------------------------
    _r(
        "residence",
        "subj",
        "住|生活|定居|居",
        rf"^{_ZADV}(?:住在|居住在|生活在|定居在|定居于|定居|常住在|常住|现居|现住|(?P<bare>住))了?"
        rf"(?P<v>{_ZV})(?:住|生活)?{_ZTAIL}",
        "zh_place",
    ),
    _r(
        "residence",
        "subj",
        "在",
        rf"^{_ZADV}在(?P<v>{_ZV})(?:生活|居住|定居|安家|(?P<bare>住))(?:下来)?{_ZTAIL}",
        "zh_place",
    ),
    _r(
        "residence",
        "subj",
        "搬|迁|移居",
        rf"^{_ZADV}(?:从(?P<p>{_ZV}))?{_ZADV}(?:搬家|搬|迁居|迁|移居)(?:到了|去了|来了|回了|到|去|来|回|至)"
        rf"(?P<v>{_ZV})(?:去|来)?(?:住|生活|定居)?{_ZTAIL}",
        "zh_moved",
    ),
    _r(
        "residence",
        "subj",
        "住|生活|搬|离开",
        rf"^{_ZADV}(?:已经)?(?:不住在|不在|没住在|不再住在|不再生活在|搬离了|搬离|搬出了|搬出|"
        rf"以前住在|以前住|之前住在|之前住|曾经住在|曾住在|原来住在|过去住在)(?P<v>{_ZV})"
        rf"(?:住|生活|居住)?(?:了)?{_ZTAIL}",
        "zh_cancel_place",
    ),
    _r(
        "residence",
        "subj",
        "离开",
        rf"^{_ZADV}离开了?(?P<v>{_ZV}){_ZTAIL}",
        "zh_left",
    ),
    # --- employer / job title ---------------------------------------------------------------
    _r(
        "employer",
        "subj",
        "在",
        rf"^{_ZADV}在(?P<v>{_ZV})(?:工作|上班|任职|就职|供职|实习)(?:了)?{_ZTAIL}",
        "zh_employer",
    ),
    _r(
        "employer",
        "subj",
        "当|担任|做",
        rf"^{_ZADV}在(?P<v>{_ZV})(?:当(?!然|时|初|地|天)|担任|做|任)了?(?P<t>{_JOB_TITLE_ZH}){_ZTAIL}",
        "zh_employer_title",
    ),
    _r(
        "employer",
        "subj",
        "入职|加入|加盟|跳槽",
        rf"^{_ZADV}(?:入职|加入|加盟|跳槽到|跳槽去|跳槽进|跳槽至|跳槽)了?(?P<v>{_ZV})"
        rf"(?:公司)?(?:工作|上班)?(?:了)?{_ZTAIL}",
        "zh_employer_chg",
    ),
    _r(
        "employer",
        "poss",
        "工作|公司|东家|单位",
        rf"^(?:新工作|新公司|新东家|新单位|现在的公司|公司|单位|雇主)(?:是|在)(?P<v>{_ZV}){_ZTAIL}",
        "zh_employer",
    ),
    _r(
        "employer",
        "subj",
        "离职|辞|裁|不在|以前在|之前在|曾经在|离开",
        rf"^{_ZADV}(?:从|在)(?P<v>{_ZV})(?:离职|辞职)了?{_ZTAIL}"
        rf"|^{_ZADV}(?:辞去了|辞掉了|辞了)(?P<v2>{_ZV})的(?:工作|职位|职务){_ZTAIL}"
        rf"|^{_ZADV}(?:不在|不再在|已经不在|以前在|之前在|曾经在|原来在)(?P<v3>{_ZV})"
        rf"(?:工作|上班|任职)(?:了)?{_ZTAIL}|^{_ZADV}被(?P<v4>{_ZV})(?:裁员|裁|开除|辞退)了?"
        rf"{_ZTAIL}",
        "zh_cancel_employer",
    ),
    _r(
        "job_title",
        "subj",
        "是|当|担任|成为|做",
        rf"^{_ZADV}(?:是一名|是一位|是一个|是名|是个|是|当了|当(?!然|时|初|地|天|作|成|做|中|年)|担任|"
        rf"成为了|成为|做了|做)"
        rf"(?P<t>{_JOB_TITLE_ZH}){_ZTAIL}",
        "zh_title",
    ),
    _r(
        "job_title",
        "subj",
        "升|晋升|提拔",
        rf"^{_ZADV}(?:被)?(?:升职为|升职成了|升职成|升为|升任|晋升为|晋升成|被提拔为|提拔为|升成了|升成)"
        rf"(?P<t>{_ZV}){_ZTAIL}",
        "zh_title_chg",
    ),
    _r(
        "job_title",
        "poss",
        "职位|职业|岗位|职务|工作",
        rf"^(?:职位|职业|岗位|职务|工作)(?:是|为)(?P<t>{_JOB_TITLE_ZH}){_ZTAIL}",
        "zh_title",
    ),
    # --- diet, relationship, name, age, things ------------------------------------------------
    _r(
        "diet",
        "subj",
        "素",
        rf"^{_ZADV}(?P<v>吃素食|吃素|吃全素|吃纯素|是素食者|是素食主义者|是纯素食者|是纯素主义者|"
        rf"是一名素食者|是一个素食者|是一名素食主义者|是素食|成了素食者|成为了素食者|"
        rf"成为素食者){_ZTAIL}",
        "zh_diet",
    ),
    _r(
        "diet",
        "subj",
        "素|肉",
        r"^(?:已经)?(?P<v>不再吃素|不吃素|不是素食者|不再是素食者|不是素食主义者|"
        r"开始吃肉|又吃肉|重新吃肉)了?\s*$",
        "zh_cancel_diet",
    ),
    _r(
        "diet",
        "subj",
        "碳|生酮|地中海|断食",
        rf"^{_ZADV}(?:在)?(?:吃|采用|坚持|开始|执行|尝试|改成|改为|换成)?了?(?P<v>低碳水|低碳|生酮|地中海|"
        rf"间歇性断食|轻断食)(?:饮食|餐|减肥法)?{_ZTAIL}",
        "zh_diet_plan",
    ),
    _r(
        "relationship",
        "subj",
        "婚|单身|恋爱|男朋友|女朋友|对象|分手",
        rf"^{_ZADV}(?P<v>结婚|订婚|离婚|分手|单身|已婚|是单身|恋爱|在谈恋爱|谈恋爱|脱单|"
        rf"有女朋友|有男朋友|有对象|交了女朋友|交了男朋友)(?:了)?{_ZTAIL}",
        "zh_relationship",
    ),
    _r(
        "name",
        "subj",
        "叫",
        r"^(?:名)?叫(?![了过来醒车外他她你它我])"
        r"(?P<v>[\u4e00-\u9fff]{2,4}|[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*)?)"
        r"\s*$",
        "name",
    ),
    _r(
        "name",
        "poss",
        "名字",
        r"^(?:名字|全名|真名)(?:是|叫)"
        r"(?P<v>[\u4e00-\u9fff]{2,4}|[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*)?)"
        r"\s*$",
        "name",
    ),
    _r(
        "age",
        "subj",
        "岁",
        r"^(?:今年|现在|已经|刚|刚刚|马上就)*(?:满)?(?P<v>\d{1,3}|[一二三四五六七八九十两]{1,3})"
        r"(?:周)?岁(?:了)?\s*$",
        "zh_age",
    ),
    _r(
        "phone",
        "poss",
        "手机|车|电脑|笔记本",
        rf"^(?:新)?(?P<k>手机号码|手机号|电话号码|手机|汽车|车子|车|电脑|笔记本电脑|笔记本)"
        rf"(?:现在)?(?:是|换成了|换成)(?:一[台部辆个])?(?P<v>{_ZV}){_ZTAIL}",
        "thing",
    ),
    # --- favourites and usage -----------------------------------------------------------------
    _r(
        "favourite",
        "subj",
        "喜欢|最爱",
        rf"^{_ZADV}(?:最喜欢|最爱|喜欢)(?:用|喝|吃|看|听|玩|读|去)?的(?P<n>{_ZV})(?:是|就是|变成了|成了)"
        rf"(?P<v>{_ZV}){_ZTAIL}",
        "favourite",
    ),
    _r(
        "favourite",
        "free",
        "最喜欢|最爱",
        rf"^(?P<v>{_ZV})(?:现在)?(?:是|成了|变成了)我(?:最喜欢|最爱)(?:用|喝|吃|看|听|玩|读)?的"
        rf"(?P<n>{_ZV}){_ZTAIL}",
        "favourite",
    ),
    _r(
        "favourite",
        "free",
        "更喜欢|最喜欢|更爱|偏好|首选",
        rf"^(?P<n>[\u4e00-\u9fffa-z0-9 ]{{1,8}}?)(?:的话|方面|上)?"
        rf"我(?:更喜欢|最喜欢|更爱|偏好|首选)"
        rf"(?:用|喝|吃|看|听|玩|读)?(?P<v>{_ZV}){_ZTAIL}",
        "favourite",
    ),
    _r(
        "usage",
        "subj",
        "更喜欢|偏好|首选|偏爱",
        rf"^{_ZADV}(?:更喜欢|偏好|首选|偏爱|比较喜欢)(?:用|喝|吃|看|听|玩|读)?(?P<v>{_ZV}){_ZTAIL}",
        "zh_prefer",
    ),
    _r(
        "usage",
        "subj",
        "换|改|转|切换|迁移|代替|替代|取代",
        rf"^{_ZADV}(?:从|把)(?:用)?(?P<p>{_ZV})(?:换成了|换成|换到了|换到|转到了|转到|转向了|转向|"
        rf"改用了|改用|改成了|改成|切换到了|切换到|切换成了|切换成|迁移到了|迁移到|转成了|转成|"
        rf"换为|换了)(?:用)?(?P<v>{_ZV}){_ZTAIL}|^{_ZADV}(?:用|开始用)(?P<v2>{_ZV})"
        rf"(?:代替|替代|取代|替换)了?(?P<p2>{_ZV}){_ZTAIL}|^{_ZADV}(?:用|喝|改用|现在用)"
        rf"(?P<v3>{_ZV})而不是(?:用|喝)?(?P<p3>{_ZV})了?{_ZTAIL}",
        "switch",
    ),
    _r(
        "usage",
        "subj",
        "改用|换成|换用|转用|切换到|改喝|换了",
        rf"^{_ZADV}(?:改用|换成|换用|转用|切换到|切换成|改喝|改成|换成了|改用了|换用了)(?:了)?"
        rf"(?P<v>{_ZV}){_ZTAIL}",
        "zh_switch_unnamed",
    ),
    _r(
        "usage",
        "subj",
        "用|喝",
        rf"^{_ZADV}(?:都|主要|一般|平时|通常|一直|还是|只|基本上)*(?:用|使用|喝)(?:的是)?\s*"
        rf"(?P<v>[a-z0-9][a-z0-9 .+#_-]*?)\s*(?:来)?(?P<n>[\u4e00-\u9fff]{{1,8}})?{_ZTAIL}"
        rf"|^{_ZADV}(?:都|主要|一般|平时|通常|一直|还是|只|基本上)*(?:用|使用|喝)(?:的是)?"
        rf"(?P<v2>{_ZV}){_ZTAIL}",
        "zh_use",
    ),
    _r(
        "usage",
        "subj",
        "用",
        rf"^(?P<n>(?:做|写|记|画|拍|剪|修|聊|学|查|管理|处理|编辑|开发|设计|听|看)[\u4e00-\u9fff]{{1,4}}?)"
        rf"(?:都|一直|主要|平时|一般|通常|还是|全靠|基本)*(?:用|使用|靠)(?:的是)?\s*(?P<v>{_ZV}){_ZTAIL}",
        "zh_use",
    ),
    _r(
        "usage",
        "subj",
        "不用|不再|戒|放弃|停用|不喝|弃用",
        rf"^{_ZADV}(?:已经)?(?:不再用|不再使用|停用了|停用|弃用了|弃用|不再喝|"
        rf"放弃了|放弃|戒了|戒掉了|戒掉|戒)(?P<v>{_ZV}){_ZTAIL}|^{_ZADV}(?:已经)?把?(?P<v2>{_ZV})"
        rf"(?:戒了|戒掉了|停了|卸载了|删了)\s*$"
        # "不用/不喝X" states a change only with 了 ("我不用微信了"; "不用塑料袋" is a habit)
        rf"|^{_ZADV}(?:已经)?(?:不用|不使用|不喝)(?P<v3>{_ZV})了{_ZTAIL}",
        "zh_cancel_usage",
    ),
    _r(
        "like",
        "subj",
        "喜欢|爱",
        rf"^{_ZADV}(?:很|非常|特别|超|挺|真的)?(?:喜欢|热爱|爱)(?:上了)?(?!的)(?P<v>{_ZV}){_ZTAIL}",
        "like",
    ),
    _r(
        "like",
        "subj",
        "喜欢",
        rf"^{_ZADV}(?:已经)?(?:不再喜欢|不喜欢|没那么喜欢)(?P<v>{_ZV})了\s*$",
        "cancel_like",
    ),
    # --- plans --------------------------------------------------------------------------------
    _r(
        "plan",
        "subj",
        "打算|计划|准备|要|将|会|决定|预计|安排",
        rf"^(?:{_ZH_TIME_FUTURE}|{_ZH_ADV})*(?:打算|计划|准备|要|将要|将|会|决定|预计|安排)"
        rf"(?:{_ZH_TIME_FUTURE}|{_ZH_ADV}|和[\u4e00-\u9fff]{{1,4}}|跟[\u4e00-\u9fff]{{1,4}}|"
        rf"一起)*(?:去参加|参加|去|到|飞|飞去|飞往|前往)(?P<v>{_ZV})(?:旅游|旅行|玩|度假|出差|看看|逛逛|"
        rf"过年|度蜜月|自驾|徒步|留学|读书|学习|开会|参会|看展|探亲)?{_ZTAIL}",
        "zh_plan",
    ),
    _r(
        "plan",
        "subj",
        "而不是|改去",
        rf"^(?:{_ZH_TIME_FUTURE}|{_ZH_ADV})*(?:打算|计划|准备|要|决定|会)?(?:改)?去(?P<v>{_ZV})"
        rf"(?:旅游|旅行|玩)?而不是(?:去)?(?P<p>{_ZV}){_ZTAIL}",
        "plan_instead",
    ),
    _r(
        "plan",
        "subj",
        "取消",
        rf"^{_ZADV}(?:已经)?取消了?(?P<v>{_ZV}){_ZTAIL}",
        "zh_plan_cancel_obj",
    ),
    _r(
        "plan",
        "subj",
        "不去|去不了|去不成",
        rf"^{_ZADV}(?:已经)?(?:不去|不打算去|不准备去|不想去|不计划去|去不了|去不成|不能去|不会去)"
        rf"(?P<v>{_ZV})(?:旅游|旅行|玩|了)*\s*$",
        "zh_plan_cancel",
    ),
    _r(
        "plan",
        "free",
        "不去|取消|泡汤|黄了|去不成|去不了",
        rf"^(?P<v>{_ZV})(?:我)?(?:就|也|还是|已经)?(?:不去了|去不了了|去不成了|不打算去了|不准备去了|"
        rf"不想去了|取消了|被取消了|泡汤了|黄了|不去)\s*$",
        "zh_plan_cancel",
    ),
)


# ---------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------

_EN_DENY = _words(
    "home here there night nights work school myself yourself himself herself themselves "
    "weekends weekend the moment moment present night shift"
)
_EN_UNNAMED_DENY = _words("living while bit few moment change reason time week day")
_EN_GROUP_WORDS = re.compile(
    r"\b(?:club|gym|team|group|community|league|band|choir|class|course|program|programme|"
    r"society|association|discord|slack|server|channel|forum|meetup|waitlist|newsletter)\b"
)
_ZH_GROUP_WORDS = re.compile(
    r"俱乐部|社团|协会|群|小组|读书会|健身房|乐队|合唱团|班|课程|会员|志愿|粉丝|队"
)
_ZH_BRAND = re.compile(
    r"[A-Za-z]|华为|小米|苹果|三星|特斯拉|比亚迪|宝马|奔驰|奥迪|丰田|本田|大众|蔚来|理想|小鹏|荣耀|一加|"
    r"联想|戴尔|惠普|红米|魅族|极氪|问界|吉利|长城|福特|雷克萨斯|保时捷|沃尔沃|日产|别克|五菱"
)
_ZH_RELATIVE_PLACE = re.compile(
    r"附近|旁边|对面|隔壁|楼上|楼下|周边|一带|边上|里面|那边|这边|家$|家里|家中|宿舍|公寓|房子|小区|酒店|宾馆|"
    r"学校|公司|单位|医院|这里|那里|哪里|一起|楼|^[和跟与同我你他她]"
)
_ZH_PAST_SPAN = re.compile(r"时候|时期|期间|那[几些]?年|那会|那阵|之前|以前|过")
_ZH_NOT_ORG = re.compile(
    r"^(?:找|寻找|努力|认真|拼命|专心|用心|好好|继续|开心|快乐|辛苦|加班|远程|居家|线上|线下|兼职|全职|"
    r"外面|外边|里面|家|忙|准备|考虑|学习|帮|给|为|替)"
)
_ZH_GENERIC_ORG = _words(
    "公司 单位 工厂 厂里 学校 医院 银行 政府 外企 国企 央企 大厂 创业公司 互联网公司 私企 事业单位 "
    "机关 部门 总部 分公司 门店 店里 实验室 研究所 家里 老家 本地 外地"
)
_ZH_ORG_SUFFIX = re.compile(
    r"公司|集团|银行|大学|学院|学校|医院|中心|研究所|研究院|科技|网络|软件|工厂|厂|局|所|院|馆|店|社|台|"
    r"报|站|部|处|委|署|协会|基金|证券|保险|律所|事务所"
)
_ZH_UNNAMED = re.compile(r"^(?:一[家所个间座]|某)")
_ZH_INDEFINITE = re.compile(r"^(?:一[家个间所座位名]|某|这|那|一些|几家|另一)")
_ZH_PLAN_OBJ_PREFIX = re.compile(
    r"^(?:去|到|飞|飞去|前往|参加|这次|那次|原定的|原计划的|我的|我们的)+"
)
_ZH_PLAN_OBJ_SUFFIX = re.compile(
    r"(?:的)?(?:之行|之旅|的行程|行程|的旅行|旅行|的旅游|旅游|的计划|计划|的机票|机票|的酒店|酒店|"
    r"的出行|出行|的度假|度假|玩|出差|自驾游|自驾|的票|票|留学|读书|探亲|开会|那趟|这趟|那次|这次|一趟|"
    r"的)+$"
)
_ZH_TRAVEL_CUE = re.compile(
    r"行程|旅行|旅游|之行|之旅|计划|机票|酒店|出行|度假|那趟|这趟|^去|^到|音乐节|演唱会|婚礼|马拉松|比赛|展会"
)
_EN_PLAN_OBJ_JUNK = re.compile(r"^(?:the|a|an|my|our|big|upcoming|planned|next)\s+")
_EN_PLACE_HEADS = re.compile(
    r"\b(?:apartment|flat|house|home|dorm|dormitory|condo|studio|room|building|suburbs?|"
    r"downtown|city cent(?:er|re)|countryside|neighbou?rhood|area|village|town|place|"
    r"basement|hotel|hostel|flatshare|houseboat|trailer|camper|van)\b"
)


# "my favourite part is the ending": of what? not one attribute of the user
_GENERIC_FAVOURITES = _words(
    "part thing bit moment memory one aspect feature scene line quote way time day kind type "
    "部分 地方 时候 东西 一个 一点 时刻 瞬间"
)


def _upper_at(clause: _Clause, start: int) -> bool:
    """The original text is capitalised at `start` (after an optional article)."""
    text = clause.text
    m = _LEADING_ARTICLE.match(clause.low, start)
    if m:
        start = m.end()
    while start < len(text) and text[start] in "'\" ":
        start += 1
    if start >= len(text):
        return False
    ch = text[start]
    if clause.all_lower:
        return ch.isalnum()
    if ch.isupper() or ch.isdigit():
        return True
    # "iPhone", "eBay": a capital inside the first word
    word = _FIRST_WORD.match(text, start)
    return bool(word) and any(c.isupper() for c in word.group())


_CONNECTORS = _words(
    "of the and de la le les du des da di del von van der den upon on am im in y e & - 's"
)


def _proper(clause: _Clause, start: int, raw: str) -> bool:
    """Every word of a name is capitalised ("Bank of America", "New York"), or the memory is
    all lowercase and gives no such evidence (callers then ask for a known place)."""
    if clause.all_lower:
        return True
    original = clause.text[start : start + len(raw)]
    article = _LEADING_ARTICLE.match(original)
    original = original[article.end() :] if article else original
    words = _NAME_WORD.findall(original)
    if not words:
        return False
    for word in words:
        core = word.strip("'\".()")
        if not core or core.lower() in _CONNECTORS or not any(ch.isalpha() for ch in core):
            continue
        if _HAS_CJK.search(core) or any(ch.isupper() for ch in core):
            continue
        return False
    return True


def _word_count(value: str) -> int:
    return len(value.split())


def _en_value(
    clause: _Clause,
    m: re.Match[str],
    group: str,
    *,
    cap: bool,
    words: int = 6,
    indefinite: bool = False,
) -> str | None:
    raw = m.group(group)
    if raw is None:
        return None
    start = clause.rest + m.start(group)
    if not indefinite and _INDEFINITE.match(raw):
        return None  # "a startup", "an apartment": not a named value
    if cap and not (_upper_at(clause, start) and _proper(clause, start, raw)):
        return None
    v = _norm(raw)
    if not v or v in _PRONOUN_VALUES or _word_count(v) > words:
        return None
    return v


def _plan_value(c: _Clause, m: re.Match[str], name: str) -> str | None:
    """What a plan is about: a named place or event ("Japan", "the Chicago Marathon"), or an
    event however named ("a jazz festival")."""
    raw = m.group(name)
    if raw is not None and _EVENT_VALUE.match(_lower(raw).strip()):
        v = _norm(raw)
        return v if v and _word_count(v) <= 5 else None
    return _en_value(c, m, name, cap=True, words=4)


def _zh_value(raw: str | None, *, limit: int = 15) -> str | None:
    if raw is None:
        return None
    v = _norm(raw)
    v = _ZH_VALUE_LEAD.sub("", v).strip()
    v = _ZH_TRAILING.sub("", v).strip()
    if not v or v in _PRONOUN_VALUES or len(v) > limit or (len(v) < 2 and not _is_cjk(v)):
        return None
    return v


def _zh_is_place(v: str) -> bool:
    """A Chinese value names a place ("上海", "上海浦东", "杭州市"), not an organisation."""
    for place in _ZH_PLACES:
        if v.startswith(place):
            return not _ZH_ORG_SUFFIX.search(v[len(place) :])
    return bool(_ZH_PLACE_SUFFIX.search(v)) and not _ZH_ORG_SUFFIX.search(v)


def _first_group(m: re.Match[str], *names: str) -> tuple[str | None, str | None]:
    for name in names:
        if m.groupdict().get(name) is not None:
            return name, m.group(name)
    return None, None


def _b_place(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if not single_ok:
        return []
    v = _en_value(c, m, "v", cap=True)
    if v is None or v in _EN_DENY or v in _EN_TOOLS_NOT_PLACES:
        return []  # "I live in Minecraft", "I live in Slack"
    if v not in _EN_PLACES and _EN_PLACE_HEADS.search(v):
        return []  # "I live in the city centre" (but "the Bay Area" is a place)
    if c.all_lower and v not in _EN_PLACES:
        return []  # no capital letters to tell "hangzhou" from "fear of spiders"
    return [Frame("residence", v, previous="" if c.chg else None)]


def _b_moved(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if not single_ok:
        return []
    v = _en_value(c, m, "v", cap=True)
    pname, _ = _first_group(m, "p", "p2")
    p = _en_value(c, m, pname, cap=True) if pname else None
    if v is None or _EN_PLACE_HEADS.search(v) or v in _EN_TOOLS_NOT_PLACES:
        return []
    if m.group("verb").startswith("moved") and not (
        v in _EN_PLACES or v.split(",")[0].strip() in _EN_PLACES or (p and p in _EN_PLACES)
    ):
        return []  # "moved to Neovim", "moved to Google": not a residence
    return [Frame("residence", v, previous=p if p else "")]


def _b_cancel_place(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _en_value(c, m, "v", cap=True)
    if v is None or _EN_PLACE_HEADS.search(v) or (c.all_lower and v not in _EN_PLACES):
        return []
    return [Frame("residence", "", cancel=True, previous=v)]


def _b_employer(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if c.all_lower:
        return []  # without capitals a company can't be told from "work at night"
    out: list[Frame] = []
    if _A_AN.match(m.group("v")) and kind == "employer":
        # "works at a fintech startup": an unnamed employer, kept as "a ..." so that a named
        # one can retire it but it never retires one
        v = _en_value(c, m, "v", cap=False, words=5, indefinite=True)
        v = f"a {v}" if v and v not in _EN_UNNAMED_DENY else None
    else:
        v = _en_value(c, m, "v", cap=True)
    if v is None or v in _EN_DENY or v in _EN_PLACES or _EN_GROUP_WORDS.search(v):
        return []
    if not single_ok:
        return []
    out.append(Frame("employer", v, previous="" if kind == "employer_chg" or c.chg else None))
    t = _en_value(c, m, "t", cap=False) if "t" in m.groupdict() else None
    if t is not None and _JOB_TITLE_EN_RE.fullmatch(t):
        out.append(_title_frame(t, None))
    return out


def _b_employer_left_for(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _en_value(c, m, "v", cap=True)
    p = _en_value(c, m, "p", cap=True)
    if not v or not p or not single_ok or p == v:
        return []
    if {v, p} & (_EN_PLACES | _EN_DENY) or _EN_GROUP_WORDS.search(f"{v} {p}"):
        return []
    return [Frame("employer", v, previous=p)]


def _b_cancel_employer(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if c.all_lower:
        return []  # without capitals a company can't be told from "work at night"
    v = _en_value(c, m, "v", cap=True)
    if v is None or v in _EN_DENY or v in _EN_PLACES or _EN_GROUP_WORDS.search(v):
        return []
    if _FOR_TO.search(v):
        return []  # "left Google for Meta": the switch rule's
    return [Frame("employer", "", cancel=True, previous=v)]


def _b_title(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if not single_ok:
        return []
    t = _en_value(c, m, "t", cap=False, words=5)
    if t is None or not _JOB_TITLE_EN_RE.fullmatch(t):
        return []  # "work as a team", "promoted to the next level"
    out = [_title_frame(t, "" if kind == "title_chg" else None)]
    if "v" in m.groupdict() and m.group("v") and not c.all_lower:
        v = _en_value(c, m, "v", cap=True)
        if v is not None and v not in _EN_DENY and v not in _EN_PLACES:
            out.append(Frame("school" if out[0].slot == "education" else "employer", v))
    return out


def _b_diet(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    return [Frame("diet", _diet(m.group("v")))] if single_ok else []


def _b_diet_any(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    d = _diet(m.group("v"))
    slot = "diet" if d in ("vegetarian", "vegan", "pescatarian") else "diet_plan"
    return [Frame(slot, d)] if single_ok else []


def _b_cancel_diet(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    _, d = _first_group(m, "v", "v2")
    return [Frame("diet", "", cancel=True, previous=_diet(d or ""))]


def _b_relationship(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    return [Frame("relationship", m.group("v"))] if single_ok else []


def _b_relationship_dating(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if not single_ok:
        return []
    return [Frame("relationship", "single" if m.groupdict().get("bu") else "dating")]


def _b_name(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    raw = m.group("v")
    start = c.rest + m.start("v")
    if not _HAS_CJK.search(raw) and not _upper_at(c, start):
        return []
    v = _norm(raw)
    if not v or v in _PRONOUN_VALUES or _NOT_A_NAME.match(v) or _ZH_OTHER_PERSON.search(v):
        return []
    return [Frame("name", v)] if single_ok else []


def _b_age(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    n = int(m.group("v"))
    return [Frame("age", str(n))] if 0 < n < 130 and single_ok else []


def _b_zh_age(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    n = _zh_int(m.group("v"))
    return [Frame("age", str(n))] if n and 0 < n < 130 and single_ok else []


def _b_thing(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    k = m.group("k")
    key = {
        "phone number": "phone_number",
        "cell number": "phone_number",
        "mobile number": "phone_number",
        "手机号码": "phone_number",
        "手机号": "phone_number",
        "电话号码": "phone_number",
        "cell phone": "phone",
        "mobile": "phone",
        "smartphone": "phone",
        "手机": "phone",
        "汽车": "car",
        "车子": "car",
        "车": "car",
        "电脑": "laptop",
        "笔记本电脑": "laptop",
        "笔记本": "laptop",
    }.get(k, k)
    if key == "phone_number":
        digits = _NON_DIGIT.sub("", m.group("v"))
        return [Frame("phone_number", digits)] if len(digits) >= 5 and single_ok else []
    if _HAS_CJK.search(c.text):
        v = _zh_value(m.group("v"))
        if v is None or _ZH_INDEFINITE.match(v) or not _ZH_BRAND.search(v):
            return []  # "我的车是红色的": a colour, not a car
    else:
        v = _en_value(c, m, "v", cap=True, words=5)
    if key == "phone" and v:
        v = _phone(v) or v
    return [Frame(key, v)] if v and single_ok else []


def _b_favourite(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    n = _norm(m.group("n")) if m.group("n") else ""
    n = _ALIASES.get(n, n)
    if _HAS_CJK.search(c.text):
        v = _zh_value(m.group("v"), limit=20)
        n = _ZH_VERB_LEAD.sub("", n)
    else:
        v = _en_value(c, m, "v", cap=False, words=6, indefinite=True)
        n = _NOUN_TAIL.sub("", n)
        n = _PLURAL_S.sub("", n)
    if not v or not n or len(n) > 30 or n in _PRONOUN_VALUES or n in _GENERIC_FAVOURITES:
        return []
    return [Frame(f"favourite:{n}", v, previous="" if c.chg else None)] if single_ok else []


def _b_use(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _en_value(c, m, "v", cap=False, words=5, indefinite=True)
    if v is None:
        return []
    n = ""
    if "n" in m.groupdict() and m.group("n"):
        n = _norm(m.group("n"))
    n = n or c.topic
    if kind == "prefer" and not n:
        return [Frame("usage:", v, previous="" if c.chg else None)]
    if kind == "prefer":
        return [Frame(f"favourite:{n}", v)] if single_ok else []
    # "now" alone is no switch marker: "I now use Copilot for coding" keeps VS Code
    return _usage(v, n, c, single_ok)


def _usage(v: str, n: str, c: _Clause, single_ok: bool) -> list[Frame]:
    """What one uses (in category `n`); a phone brand with no category is the phone."""
    phone = _phone(v)
    if phone and not n and single_ok:
        return [Frame("phone", phone, previous="" if c.chg else None)]
    return [Frame(f"usage:{n}", v, previous="" if c.chg else None)]


def _b_switch(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    vname, _ = _first_group(m, "v", "v2", "v3")
    pname, _ = _first_group(m, "p", "p2", "p3")
    if vname is None:
        return []
    zh = bool(_HAS_CJK.search(c.text))
    p: str | None = None
    if zh:
        v = _zh_value(m.group(vname))
        p = _zh_value(m.group(pname)) if pname else None
    else:
        v = _en_value(c, m, vname, cap=False, words=5, indefinite=True)
        p = _en_value(c, m, pname, cap=False, words=5, indefinite=True) if pname else None
    n = _norm(m.group("n")) if m.groupdict().get("n") else c.topic
    if not v or (pname is not None and not p):
        return []
    if p is not None and p == v:
        return []
    if p and (p in _EN_PLACES or v in _EN_PLACES or (zh and _zh_is_place(p))):
        return [Frame("residence", v, previous=p)] if single_ok else []
    if p and p in _ZH_THING_NOUNS:  # "我把手机换成小米了": the phone changed, to 小米
        slot = _ZH_THING_NOUNS[p]
        value = _phone(v) if slot == "phone" else v
        return [Frame(slot, value or v, previous="")] if single_ok else []
    if _phone(v) and (p is None or _phone(p)) and not n:
        prev = _phone(p) if p else ""
        return [Frame("phone", _phone(v) or v, previous=prev)] if single_ok else []
    return [Frame(f"usage:{n}", v, previous=p if p is not None else "")]


def _b_cancel_usage(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    name, _ = _first_group(m, "v", "v2", "v3")
    if name is None:
        return []
    bare = m.groupdict().get("bare")
    raw = m.group(name)
    if bare and _upper_at(c, c.rest + m.start(name)) and bare == "quit":
        return []  # "I quit Google": the employer rule's
    v = _en_value(c, m, name, cap=False, words=5, indefinite=True)
    if v is None:
        return []
    v = _GERUND_LEAD.sub("", v)
    if bare and _NOT_AN_OBJECT.match(raw + " "):
        return []
    n = _norm(m.group("n")) if m.groupdict().get("n") else ""
    return [Frame(f"usage:{n}", "", cancel=True, previous=v)] if v else []


def _b_like(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    if _HAS_CJK.search(c.text):
        v = _zh_value(m.group("v"))
    else:
        v = _en_value(c, m, "v", cap=False, words=5, indefinite=True)
    return [Frame("like:", v)] if v else []


def _b_cancel_like(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    name, raw = _first_group(m, "v", "v2", "v3", "v4")
    if name is None:
        return []
    v = _zh_value(raw) if _HAS_CJK.search(c.text) else _en_value(c, m, name, cap=False)
    return [Frame("like:", "", cancel=True, previous=v)] if v else []


def _b_plan(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    name, _ = _first_group(m, "v", "v2", "v3", "v4", "v5", "v6", "v7")
    if name is None:
        return []
    v = _plan_value(c, m, name)
    if v is None or v in _EN_DENY:
        return []
    return [Frame(f"plan:{v}", v)]


def _b_plan_instead(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    zh = bool(_HAS_CJK.search(c.text))
    if zh:
        v, p = _zh_plan_obj(m.group("v")), _zh_plan_obj(m.group("p"))
    else:
        v = _en_value(c, m, "v", cap=True, words=4)
        p = _en_value(c, m, "p", cap=True, words=4)
    if not v or not p or _overlap(v, p):
        return []
    return [Frame(f"plan:{v}", v, previous=p)]


def _b_plan_cancel(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    name, raw = _first_group(m, "v", "v2", "o")
    if name is None:
        return []
    if name == "o":
        v = _EN_PLAN_OBJ_JUNK.sub("", _norm(raw))
        event = bool(_EVENT_RE.fullmatch(v))
        if not (event or _upper_at(c, c.rest + m.start("o"))) or v in _PRONOUN_VALUES:
            return []
        if "'" in v:
            return []  # "Tom's Japan trip": someone else's
    else:
        v = _plan_value(c, m, name)
    if not v:
        return []
    return [Frame(f"plan:{v}", "", cancel=True, previous=v)]


def _b_zh_place(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    if v is None or not single_ok or _ZH_PAST_SPAN.search(v):
        return []
    v = v.split("的")[0]
    if not v or _ZH_INDEFINITE.match(v) or _ZH_RELATIVE_PLACE.search(v):
        return []
    if m.groupdict().get("bare") and not _zh_is_place(v):
        return []  # "住院", "在医院住了三天": not a residence
    return [Frame("residence", v, previous="" if c.chg else None)]


def _b_zh_moved(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    p = _zh_value(m.group("p")) if m.group("p") else None
    if v is None or not single_ok:
        return []
    v = v.split("的")[0]
    if (not v or _ZH_INDEFINITE.match(v) or _ZH_RELATIVE_PLACE.search(v)) and v != "老家":
        return []
    return [Frame("residence", v, previous=p if p else "")]


def _b_zh_cancel_place(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    if v is None:
        return []
    v = v.split("的")[0]
    return [Frame("residence", "", cancel=True, previous=v)] if v else []


def _b_zh_left(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    if v is None:
        return []
    if _zh_is_place(v):
        return [Frame("residence", "", cancel=True, previous=v)]
    if _ZH_EMPLOYER_HINT.search(v):
        return [Frame("employer", "", cancel=True, previous=v)]
    return []


def _b_zh_employer(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    if v is None or not single_ok:
        return []
    v = _ZH_THIS_ONE.sub("", v)
    unnamed = _ZH_UNNAMED.match(v)
    if unnamed and kind == "zh_employer" and len(v) > unnamed.end():
        # "在一家创业公司工作": an unnamed employer, retired by a named one, retiring none
        return [Frame("employer", v)]
    if (
        not v
        or len(v) < 2
        or _ZH_NOT_ORG.match(v)
        or v in _ZH_GENERIC_ORG
        or "的" in v
        or _zh_is_place(v)
        or _ZH_INDEFINITE.match(v)
        or _ZH_GROUP_WORDS.search(v)
        or _ZH_NOT_A_WORKPLACE.search(v)
    ):
        return []
    return [Frame("employer", v, previous="" if kind == "zh_employer_chg" or c.chg else None)]


def _b_zh_employer_title(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v, t = _zh_value(m.group("v")), _zh_value(m.group("t"))
    if not v or not t or not single_ok or "的" in v or _ZH_INDEFINITE.match(v):
        return []
    out = [_title_frame(t, None)]
    if not _zh_is_place(v):
        out.append(Frame("school" if out[0].slot == "education" else "employer", v))
    return out


def _b_zh_cancel_employer(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    _, raw = _first_group(m, "v", "v2", "v3", "v4")
    v = _zh_value(raw)
    if not v or _zh_is_place(v) or "的" in v or _ZH_INDEFINITE.match(v):
        return []
    return [Frame("employer", "", cancel=True, previous=v)]


def _b_zh_title(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    t = _zh_value(m.group("t"))
    if not t or not single_ok or _ZH_INDEFINITE.match(t):
        return []
    return [_title_frame(t, "" if kind == "zh_title_chg" else None)]


def _b_zh_diet(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    return [Frame("diet", "vegan" if "纯" in m.group("v") else "vegetarian")] if single_ok else []


def _b_zh_diet_plan(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    return [Frame("diet_plan", _diet(m.group("v")))] if single_ok else []


def _b_zh_cancel_diet(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    return [Frame("diet", "", cancel=True, previous="vegetarian")]


def _b_zh_relationship(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    raw = m.group("v")
    v = (
        "married"
        if raw in ("结婚", "已婚")
        else "engaged"
        if raw == "订婚"
        else "divorced"
        if raw == "离婚"
        else "single"
        if raw in ("分手", "单身", "是单身")
        else "dating"
    )
    return [Frame("relationship", v)] if single_ok else []


def _b_zh_prefer(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    if not v:
        return []
    if c.topic:
        return [Frame(f"favourite:{c.topic}", v)] if single_ok else []
    return [Frame("usage:", v, previous="" if c.chg else None)]


def _b_zh_switch_unnamed(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_value(m.group("v"))
    if not v:
        return []
    return [Frame(f"usage:{c.topic}", v, previous="")]


def _b_zh_use(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    name, raw = _first_group(m, "v", "v2")
    v = _zh_value(raw)
    if not v or _ZH_NOT_A_TOOL.match(v):
        return []
    n = _norm(m.group("n")) if name == "v" and m.group("n") else c.topic
    return _usage(v, n, c, single_ok)


def _b_zh_cancel_usage(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    _, raw = _first_group(m, "v", "v2", "v3")
    v = _zh_value(raw)
    if not v or len(v) < 2 or _ZH_NOT_A_HABIT.match(v):
        return []
    return [Frame("usage:", "", cancel=True, previous=v)]


def _b_zh_plan(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_plan_obj(m.group("v"))
    if not v or _ZH_NOT_A_TRIP.match(v):
        return []
    return [Frame(f"plan:{v}", v)]


def _b_zh_plan_cancel_obj(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    raw = m.group("v")
    if not _ZH_TRAVEL_CUE.search(_norm(raw)):
        return []
    v = _zh_plan_obj(raw)
    return [Frame(f"plan:{v}", "", cancel=True, previous=v)] if v else []


def _b_zh_plan_cancel(m: re.Match[str], c: _Clause, single_ok: bool, kind: str) -> list[Frame]:
    v = _zh_plan_obj(m.group("v"))
    if not v or _ZH_PERSON_CHAR.search(v) or _ZH_OTHER_PERSON.search(v):
        return []
    return [Frame(f"plan:{v}", "", cancel=True, previous=v)]


_BUILDERS = {
    "place": _b_place,
    "moved": _b_moved,
    "cancel_place": _b_cancel_place,
    "employer": _b_employer,
    "employer_chg": _b_employer,
    "employer_left_for": _b_employer_left_for,
    "cancel_employer": _b_cancel_employer,
    "title": _b_title,
    "title_allow": _b_title,
    "title_chg": _b_title,
    "diet": _b_diet,
    "diet_any": _b_diet_any,
    "cancel_diet": _b_cancel_diet,
    "relationship": _b_relationship,
    "relationship_dating": _b_relationship_dating,
    "name": _b_name,
    "age": _b_age,
    "zh_age": _b_zh_age,
    "thing": _b_thing,
    "favourite": _b_favourite,
    "use": _b_use,
    "prefer": _b_use,
    "switch": _b_switch,
    "cancel_usage": _b_cancel_usage,
    "like": _b_like,
    "cancel_like": _b_cancel_like,
    "plan": _b_plan,
    "plan_instead": _b_plan_instead,
    "plan_cancel": _b_plan_cancel,
    "zh_place": _b_zh_place,
    "zh_moved": _b_zh_moved,
    "zh_cancel_place": _b_zh_cancel_place,
    "zh_left": _b_zh_left,
    "zh_employer": _b_zh_employer,
    "zh_employer_chg": _b_zh_employer,
    "zh_employer_title": _b_zh_employer_title,
    "zh_cancel_employer": _b_zh_cancel_employer,
    "zh_title": _b_zh_title,
    "zh_title_chg": _b_zh_title,
    "zh_diet": _b_zh_diet,
    "zh_diet_plan": _b_zh_diet_plan,
    "zh_cancel_diet": _b_zh_cancel_diet,
    "zh_relationship": _b_zh_relationship,
    "zh_prefer": _b_zh_prefer,
    "zh_switch_unnamed": _b_zh_switch_unnamed,
    "zh_use": _b_zh_use,
    "zh_cancel_usage": _b_zh_cancel_usage,
    "zh_plan": _b_zh_plan,
    "zh_plan_cancel_obj": _b_zh_plan_cancel_obj,
    "zh_plan_cancel": _b_zh_plan_cancel,
}


def _trigger_index(rules: tuple[_Rule, ...]) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:
    """Every trigger of a language's rules, and for each the (indices of the) rules it lets
    be tried: a clause is tested against a few substrings, not every rule's regex."""
    triggers = tuple(sorted(frozenset().union(*(r.triggers for r in rules))))
    rules_of = {t: tuple(i for i, r in enumerate(rules) if t in r.triggers) for t in triggers}
    return triggers, rules_of


_EN_TRIGGERS = _trigger_index(_EN_RULES)
_ZH_TRIGGERS = _trigger_index(_ZH_RULES)
# most memories ("周五之前要把Q3的OKR发给Tom") contain no trigger at all: skip them early
_ANY_TRIGGER = re.compile(
    "|".join(re.escape(t) for t in sorted({*_EN_TRIGGERS[0], *_ZH_TRIGGERS[0]}, key=len))
)


def _candidates(rest: str, cjk: bool) -> list[_Rule]:
    """The rules worth trying on a clause, in their order."""
    triggers, rules_of = _ZH_TRIGGERS if cjk else _EN_TRIGGERS
    found = {i for t in triggers if t in rest for i in rules_of[t]}
    rules = _ZH_RULES if cjk else _EN_RULES
    return [rules[i] for i in sorted(found)]


def _build(rule: _Rule, m: re.Match[str], c: _Clause, single_ok: bool) -> list[Frame]:
    """The frames a rule's match states (none when a value fails the rule's checks)."""
    return _BUILDERS[rule.build](m, c, single_ok, rule.build)


_STUDENT = re.compile(
    r"(?:\bstudent|\bpupil|\bundergrad(?:uate)?|\bgrad student|"
    r"学生|研究生|博士生|本科生|硕士生|大学生|"
    r"高中生|初中生|中学生|小学生|留学生)s?$"
)


def _title_frame(title: str, previous: str | None) -> Frame:
    """A role: being a student is kept apart from a job, since the two often hold together."""
    if _STUDENT.search(title):
        return Frame("education", title, previous=previous)
    return Frame("job_title", title, previous=previous)


_ZH_THING_NOUNS = {
    "手机": "phone",
    "车": "car",
    "汽车": "car",
    "电脑": "laptop",
    "笔记本": "laptop",
}
_PHONE = re.compile(
    r"^(?:(?:my|a|an|the|new|google|apple)\s+)*(?P<b>iphone|pixel|galaxy|samsung|huawei|xiaomi|"
    r"oneplus|oppo|vivo|honor|redmi|motorola|moto|nokia|华为|小米|苹果|三星|荣耀|一加|红米|魅族)"
    r"(?P<m>(?:\s*[\w+]+){0,3}?)\s*(?:phone|smartphone|手机)?$"
)
_NOT_A_PHONE = re.compile(
    r"tab|tablet|watch|buds|earbuds|book|pad|tv|band|laptop|monitor|router|speaker|scooter|"
    r"平板|手环|手表|耳机|电视|笔记本|电脑|路由器|音箱|电动车|扫地机|汽车"
)
_PHONE_BRANDS = {
    "华为": "huawei",
    "小米": "xiaomi",
    "苹果": "iphone",
    "三星": "samsung",
    "荣耀": "honor",
    "一加": "oneplus",
    "红米": "redmi",
    "魅族": "meizu",
    "moto": "motorola",
}


def _phone(value: str | None) -> str | None:
    """The phone a value names ("a Google Pixel phone" -> "pixel", "华为手机" -> "huawei")."""
    if not value:
        return None
    m = _PHONE.match(value)
    if m is None or (m.group("b") == "苹果" and "手机" not in value and not m.group("m")):
        return None  # "苹果" alone is the fruit
    if _NOT_A_PHONE.search(m.group("m")):
        return None  # "a Galaxy Tab", "小米手环": not the phone
    brand = _PHONE_BRANDS.get(m.group("b"), m.group("b"))
    model = m.group("m").strip()
    return f"{brand} {model}".strip() if model else brand


def _diet(raw: str) -> str:
    raw = raw.lower()
    if raw in ("vegan", "plant-based"):
        return "vegan"
    if raw in ("pescatarian", "pescetarian"):
        return "pescatarian"
    if raw in ("vegetarian", "veggie"):
        return "vegetarian"
    return {
        "ketogenic": "keto",
        "low carb": "low-carb",
        "生酮": "keto",
        "低碳水": "low-carb",
        "低碳": "low-carb",
        "地中海": "mediterranean",
        "轻断食": "intermittent fasting",
        "断食": "intermittent fasting",
        "间歇性断食": "intermittent fasting",
    }.get(raw, raw)


def _zh_int(raw: str) -> int | None:
    if raw.isdigit():
        return int(raw)
    if raw == "十":
        return 10
    if "十" in raw:
        tens, _, ones = raw.partition("十")
        t = _ZH_NUM.get(tens, 1) if tens else 1
        o = _ZH_NUM.get(ones, 0) if ones else 0
        return t * 10 + o
    return _ZH_NUM.get(raw)


def _zh_plan_obj(raw: str | None) -> str | None:
    v = _zh_value(raw)
    if not v:
        return None
    v = _ZH_PLAN_OBJ_PREFIX.sub("", v)
    v = _ZH_PLAN_OBJ_SUFFIX.sub("", v)
    v = _ZH_PLAN_OBJ_PREFIX.sub("", v)
    return v or None


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------


def _lead(low: str, cjk: bool) -> tuple[re.Match[str], str]:
    m = (_ZH_LEAD if cjk else _EN_LEAD).match(low)
    assert m is not None  # every group is optional
    subj = m.group("subj") or m.group("poss")
    return m, subj or ""


_USER_SUBJECTS = frozenset({"i", "the user", "user", "my", "the user's", "user's"}) | frozenset(
    {"我", "用户", "该用户", "我的", "用户的", "该用户的"}
)
_PRONOUNS = frozenset({"he", "she", "his", "her", "他", "她", "他的", "她的"})
# "we" includes the user, for where they live and what they plan ("we moved to Shanghai",
# "we cancelled our trip to Japan"); not for a job ("we use Python" may be the company)
_WE = frozenset({"we", "our", "我们", "我们的"})
_WE_SLOTS = frozenset({"plan", "residence"})
_TRIVIAL = re.compile(
    r"^(?:and|but|so|now|also|too|though|btw|anyway|haha|lol|thanks?|thank you|ok|okay|yes|"
    r"yeah|yep|well|嗯|哈哈|好的|谢谢|对|是的|啊|哦)?[\s!.~]*$"
)


@dataclass(frozen=True)
class _Analysis:
    frames: tuple[Frame, ...]
    covered: bool  # every sentence/clause is a frame or trivial: nothing else would be lost
    key: str  # the prepared text, to recognise a restatement


# a clause that only qualifies the one before ("..., with my wife", "..., for two years")
_MODIFIER = re.compile(
    r"^(?:with|for|since|near|in|at|on|from|after|before|during|because of|due to|thanks to|"
    r"about|around|last|this|next|(?:19|20)\d\d)\b"
)


def _clause_frames(
    clause: str, carry_user: bool, seen_other: bool, all_lower: bool
) -> tuple[list[Frame], str]:
    """Frames of one clause, and who it is about: "user", "other" or "" (no subject)."""
    low = _lower(clause)
    cjk = bool(_HAS_CJK.search(clause))
    m, subj = _lead(low, cjk)
    chg = bool(m.group("chg"))
    topic = _norm(m.group("topic")) if m.group("topic") else ""
    we = subj in _WE
    if subj in _USER_SUBJECTS or we:
        about = "user"
    elif subj in _PRONOUNS:
        about = "other" if seen_other else "user"
    else:
        about = ""
    is_poss = bool(m.group("poss"))
    rest = low[m.end() :]
    c = _Clause(clause, low, m.end(), chg, topic, all_lower)
    also = (_ZH_ALSO if cjk else _EN_ALSO).search(low) is not None or bool(m.group("fut"))
    out: list[Frame] = []
    if about == "other" or (about == "" and not carry_user):
        return out, about or ("other" if not _is_prefix_only(low, cjk) else "")
    for rule in _candidates(rest, cjk):
        if we and rule.slot not in _WE_SLOTS:
            continue
        if rule.lead == "free":
            if about:
                continue
        elif rule.lead == "poss":
            if about and not is_poss:
                continue
        elif about and is_poss:
            continue
        match = rule.pattern.match(rest)
        if match is None:
            continue
        for f in _build(rule, match, c, single_ok=not also):
            _add(out, f)
    if not out:
        if is_poss or (about and (_ZH_OTHER_START if cjk else _EN_OTHER_START).match(rest)):
            about = "other"  # "my sister ...", "我妈妈...": about someone else
        elif not about and not _is_prefix_only(low, cjk):
            about = "other"  # an unknown subject ("Tom lives in Paris"): it isn't the user's
    return out, about


def _add(out: list[Frame], f: Frame) -> None:
    """Add a clause's frame; of two readings of the same value keep the more specific."""
    key = f.value or f.previous
    for i, g in enumerate(out):
        if g == f:
            return
        if (g.value or g.previous) != key or g.cancel != f.cancel:
            continue
        if _specificity(f) > _specificity(g):
            out[i] = f
        return
    out.append(f)


def _specificity(f: Frame) -> int:
    score = 2 if f.previous else 1 if f.previous == "" else 0
    return score * 4 + (0 if f.slot.startswith(("usage:", "like:")) else 1)


def _is_prefix_only(low: str, cjk: bool) -> bool:
    return bool((_ZH_PREFIX_ONLY if cjk else _EN_PREFIX_ONLY).match(low)) or bool(
        _TRIVIAL.match(low)
    )


# A memory is a short text; a longer one is left alone (and the rules stay fast).
MAX_CHARS = 500


@functools.lru_cache(maxsize=8192)
def _analyse(text: str) -> _Analysis:
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_CHARS:
        return _Analysis((), False, text if isinstance(text, str) else "")
    prepared = _prepare(text)
    if not _ANY_TRIGGER.search(_lower(prepared)):
        return _Analysis((), False, prepared)
    all_lower = not any(ch.isupper() for ch in prepared)
    found: list[Frame] = []
    covered = True
    carry_user = True
    # "he"/"she" are the user's only in a memory that names nobody else
    seen_other = bool(
        _ZH_OTHER_PERSON.search(prepared) or _EN_OTHER_PERSON.search(_lower(prepared))
    )
    for sentence in _sentences(prepared):
        low_sentence = _lower(sentence)
        cjk = bool(_HAS_CJK.search(sentence))
        other_here = (_ZH_OTHER_PERSON if cjk else _EN_OTHER_PERSON).search(low_sentence)
        if _is_question(sentence, low_sentence):
            # a question states nothing about the user that retiring the memory would lose
            seen_other = seen_other or bool(other_here)
            continue
        if _is_hypothetical(low_sentence, cjk):
            covered = False
            seen_other = seen_other or bool(other_here)
            continue
        clauses = _zh_clauses(sentence) if cjk else _en_clauses(sentence)
        # a clause that is only a prefix ("Last month", "from now on", "咖啡的话") leads the next
        merged: list[str] = []
        pending = ""
        for cl in clauses:
            low_cl = _lower(cl)
            if _is_prefix_only(low_cl, bool(_HAS_CJK.search(cl))) and not _TRIVIAL.match(low_cl):
                pending = f"{pending} {cl}".strip() if not cjk else f"{pending}{cl}"
                continue
            if pending:
                cl = f"{pending} {cl}" if not cjk else f"{pending}{cl}"
                pending = ""
            merged.append(cl)
        for cl in merged:
            frames_here, about = _clause_frames(cl, carry_user, seen_other, all_lower)
            if about == "user":
                carry_user = True
            elif about == "other":
                carry_user = False
                seen_other = True
            if frames_here:
                found.extend(frames_here)
            elif not _is_prefix_only(_lower(cl), bool(_HAS_CJK.search(cl))) and not (
                _MODIFIER.match(_lower(cl))
            ):
                covered = False
        seen_other = seen_other or bool(other_here)
    return _Analysis(_resolve(found), covered and bool(found), prepared)


def _resolve(found: list[Frame]) -> tuple[Frame, ...]:
    """One text's frames, later statements winning, so that no frame supersedes another."""
    kept: list[Frame] = []
    for f in found:
        if f in kept:
            continue
        kept = [k for k in kept if not supersedes(f, k) and not supersedes(k, f)]
        kept.append(f)
    return tuple(kept)


def frames(text: str) -> tuple[Frame, ...]:
    """Every frame of a memory text, in text order (usually none or one)."""
    return _analyse(text).frames


def frame(text: str) -> Frame | None:
    """The attribute frame of a memory text (its first when it states several), or None."""
    found = frames(text)
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------
# Supersession
# ---------------------------------------------------------------------------------------------


def _family(slot: str) -> tuple[str, str]:
    family, _, category = slot.partition(":")
    return family, category


def _usage_targets(cat_new: str, fam_old: str, cat_old: str) -> bool:
    """A usage switch/cancellation reaches the old frame: a category named by the new one
    ("for backend") must be the old one's; without one it reaches every usage and favourite."""
    if fam_old == "usage":
        return not cat_new or cat_new == cat_old
    return fam_old == "favourite" and not cat_new


def _single(slot: str) -> bool:
    return slot in SINGLE_VALUED or slot.startswith("favourite:")


def supersedes(new: Frame, old: Frame) -> bool:
    """Whether the statement `new` makes the older statement `old` outdated."""
    if old.cancel or not old.value:
        return False
    fam_new, cat_new = _family(new.slot)
    fam_old, cat_old = _family(old.slot)
    if new.cancel:
        target = new.previous or ""
        if fam_new == "plan":
            return fam_old == "plan" and _overlap(cat_new or target, cat_old)
        if not target:
            return False
        if fam_new == "usage":
            return _usage_targets(cat_new, fam_old, cat_old) and _names(old.value, target)
        if fam_new == "like":
            return fam_old in ("like", "favourite") and _names(old.value, target)
        return new.slot == old.slot and _names(old.value, target)
    if not new.value:
        return False
    if fam_new == "plan":
        return (
            bool(new.previous)
            and fam_old == "plan"
            and _overlap(new.previous or "", cat_old)
            and not _overlap(cat_new, cat_old)
        )
    if new.previous:  # an explicit switch naming the old value
        if fam_new == "usage":
            ok = _usage_targets(cat_new, fam_old, cat_old)
        elif fam_new == "favourite":
            ok = old.slot == new.slot or (fam_old == "usage" and not cat_old)
        else:
            ok = new.slot == old.slot
        if ok and _names(old.value, new.previous) and not _same(old.value, new.value):
            return True
    if _single(new.slot) and new.slot == old.slot:
        if _unnamed(new.value):
            return False  # "a startup" may be the very employer the old memory names
        if _is_cjk(new.value) != _is_cjk(old.value):
            return False  # "杭州" and "Hangzhou" can't be compared here
        if new.slot == "residence" and _is_region(new.value) != _is_region(old.value):
            return False  # "California" and "San Francisco" can both be true
        if new.previous is not None:  # a change: the old value is replaced unless it says more
            return not _contains(old.value, new.value)
        return not _same(new.value, old.value)
    if fam_new == "usage" and new.previous == "" and cat_new:
        # "from now on I use Y for C", "C我改用Y了": the usage of that category changed
        return (
            fam_old == "usage"
            and cat_old == cat_new
            and not _same(new.value, old.value)
            and not _LIST_MARK.search(old.value)
        )
    return False


def _unnamed(value: str) -> bool:
    return value.startswith(("a ", "an ")) or bool(_ZH_UNNAMED.match(value))


def _reason(new: Frame, old: Frame) -> str:
    fam, category = _family(old.slot)
    slot = fam if fam == "plan" or not category else old.slot
    after = "cancelled" if new.cancel else new.value
    return f"{slot}: {old.value} -> {after}"


def retired_by(new_text: str, old: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """For a new memory text and the (id, text) of older memories of the same user, the
    (id, reason) of those the new one makes outdated; reason is a short human-readable
    string naming the slot and the values, e.g. "residence: hangzhou -> shanghai"."""
    new_frames = frames(new_text)
    if not new_frames:
        return []
    new_key = _analyse(new_text).key
    out: list[tuple[str, str]] = []
    for memory_id, text in old:
        if not isinstance(text, str) or text == new_text:
            continue
        analysis = _analyse(text)
        if not analysis.frames or not analysis.covered or analysis.key == new_key:
            continue
        reasons: list[str] = []
        for old_frame in analysis.frames:
            by = next((f for f in new_frames if supersedes(f, old_frame)), None)
            if by is None:
                break
            reasons.append(_reason(by, old_frame))
        else:
            out.append((memory_id, "; ".join(reasons)))
    return out


def restates(new_text: str, old: Iterable[tuple[str, str]]) -> str | None:
    """The id of an older memory that already states every attribute the new text states,
    with the same values ("As I said, I'm in Shanghai now" after "We moved to Shanghai"):
    the new one is a repeat in other words, which the text rules cannot see."""
    wanted = {(f.slot, _norm_value(f.value)) for f in frames(new_text) if f.value and not f.cancel}
    if not wanted:
        return None
    for memory_id, text in old:
        if not isinstance(text, str) or text == new_text:
            continue
        have = {(f.slot, _norm_value(f.value)) for f in frames(text) if f.value and not f.cancel}
        if wanted <= have:
            return memory_id
    return None


def _norm_value(value: str) -> str:
    return " ".join(value.casefold().split())
