"""Rule-based supersession of a user's memories without a language model.

Tables of labelled pairs (old memory, new memory) in English and Chinese: the positives must
retire the old memory, the hard negatives must not (other people, multi-valued likes, the same
value restated, questions, hypotheticals, past tense...). A measurement test pins the counts
of `retired_by` over all of them, gaps included; every named rule is run on its own examples,
and the tables must exercise every rule (`explain` names the rule that read each frame).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.rules.supersede import (
    RULES,
    Frame,
    Reading,
    explain,
    frame,
    frames,
    read_by,
    restates,
    retired_by,
    supersedes,
)

# (old, new): the new memory makes the old one outdated
POSITIVES: list[tuple[str, str]] = [
    # residence
    ("I live in Hangzhou.", "I moved to Shanghai last month."),
    ("The user lives in Hangzhou.", "The user lives in Shanghai."),
    ("Lives in Hangzhou", "Moved to Shanghai"),
    ("I'm based in London.", "I relocated to Berlin."),
    ("I live in Hangzhou", "I moved from Hangzhou to Shanghai."),
    ("I live in Hangzhou", "I don't live in Hangzhou anymore."),
    ("I live in Hangzhou.", "Last month, I moved to Shanghai."),
    ("我住在杭州", "我搬到上海了"),
    ("用户住在杭州。", "用户现在住在上海。"),
    ("我住在杭州", "我从杭州搬到了上海"),
    ("我住在杭州", "我不住在杭州了"),
    ("我住在杭州西湖区", "上个月我搬到了北京"),
    ("I live in Hangzhou.", "We moved to Shanghai."),  # "we" includes the user
    ("我住在杭州", "我们上周搬到上海了"),
    ("我最喜欢的编辑器是 VS Code", "我从 VS Code 换成了 Neovim"),
    # employer and job title
    ("I work at Google.", "I started a new job at Microsoft."),
    ("The user works for Alibaba.", "The user now works at Tencent."),
    ("I work at Google", "I quit my job at Google."),
    ("He works at IBM.", "He left IBM."),
    ("I work as a software engineer at Google.", "I joined Meta as a product manager."),
    ("I'm a software engineer.", "I got promoted to engineering manager."),
    ("I work as a teacher.", "I work as a nurse now."),
    ("我在阿里巴巴工作", "我跳槽到了腾讯"),
    ("用户在百度上班。", "用户入职了字节跳动。"),
    ("我是一名程序员", "我升职为技术总监了"),
    ("我在阿里巴巴工作", "我从阿里巴巴离职了"),
    ("I work at Google.", "I left Google for Meta."),
    ("The user works at a fintech startup.", "The user works at Tencent."),  # unnamed -> named
    ("用户在一家创业公司工作。", "用户在腾讯工作。"),
    ("用户是后端开发工程师。", "用户是技术组长。"),
    # favourites, preferences and switches
    ("My favourite movie is Inception.", "My favourite movie is Interstellar now."),
    ("My favorite color is blue.", "Green is my favourite colour."),
    ("The user's favourite food is sushi.", "The user's favourite food is ramen."),
    ("I prefer tea for breakfast.", "I prefer coffee for breakfast."),
    ("My go-to editor is Vim.", "I switched from Vim to VS Code."),
    ("I use PyCharm for Python development.", "I switched from PyCharm to VS Code."),
    ("I use Vim.", "I no longer use Vim."),
    ("I drink coffee every morning.", "I stopped drinking coffee."),
    ("I use Chrome.", "I now use Firefox instead of Chrome."),
    ("I like sushi.", "I don't like sushi anymore."),
    ("我最喜欢的电影是盗梦空间", "我最喜欢的电影是星际穿越"),
    ("咖啡我更喜欢美式", "咖啡我更喜欢拿铁"),
    ("我用PyCharm写代码", "我从PyCharm换成了VS Code"),
    ("我现在用 VS Code 写代码", "写代码的话我改用Zed了"),
    ("我平时用微信聊天", "我不再用微信了"),
    ("我喜欢喝可乐", "我不再喜欢喝可乐了"),
    ("The user uses VS Code as their main editor.", "The user uses Neovim as their main editor."),
    ("The user prefers a dark theme for charts.", "The user prefers a pastel palette for charts."),
    ("I use PyCharm for coding.", "From now on I use VS Code for coding."),
    ("用户做表格一直用 Excel。", "以后做表格用 WPS。"),
    ("我用 Notion 做笔记", "做笔记的话我改用 Obsidian 了"),
    # plans
    ("I'm planning a trip to Japan in May.", "I cancelled my trip to Japan."),
    ("I will go to Japan in the spring.", "The Japan trip is off."),
    ("I'm going to Japan next month.", "I'm going to Korea instead of Japan."),
    ("I'm planning to visit Paris in June.", "I decided not to go to Paris."),
    ("I'm planning a trip to Japan.", "I'm not going to Japan anymore."),
    ("我打算五月去日本", "我取消了去日本的行程"),
    ("我下个月要去日本旅游", "日本不去了"),
    ("我打算去日本", "我打算去韩国而不是日本"),
    ("用户计划下个月去日本。", "用户取消了日本之行。"),
    ("用户计划七月去新疆旅行。", "新疆那趟取消了。"),
    ("I'm planning a trip to Japan.", "Forget the Japan trip."),
    ("We're planning a trip to Iceland in February.", "We cancelled the Iceland trip."),
    ("The user plans to go to a jazz festival in May.", "The user cancelled their festival plans."),
    ("I plan to run the Chicago Marathon in October.", "I pulled out of the Chicago Marathon."),
    # diet, relationship, name, age, things
    ("I'm vegetarian.", "I'm vegan now."),
    ("I'm vegetarian.", "I'm not vegetarian anymore."),
    ("I'm single.", "I got married last week."),
    ("I'm called Tom.", "My name is Jack."),
    ("I am 30 years old.", "I just turned 31."),
    ("My phone is an iPhone 13.", "My new phone is a Pixel 8."),
    ("我吃素", "我不吃素了"),
    ("我单身", "我结婚了"),
    ("我叫小明", "我的名字是李雷"),
    ("我今年三十岁", "我今年31岁了"),
    ("我的手机是iPhone 13", "我的手机现在是Pixel 8"),
    ("The user is vegetarian.", "The user follows a vegan diet."),
    ("I'm on a keto diet.", "I follow a Mediterranean diet now."),
    ("The user uses an iPhone.", "The user uses a Google Pixel phone."),
    ("用户用的是华为手机。", "用户把手机换成小米了。"),
    # rules the pairs above do not exercise
    ("I live in Hangzhou.", "I've lived in Berlin since 2020."),
    ("I work at Google.", "I was hired at Stripe last month."),
    ("I work at Google.", "I changed jobs to Stripe."),
    ("I work at Google.", "My employer is now Stripe."),
    ("I work as a teacher.", "My role is product manager now."),
    ("I'm single.", "I'm now in a relationship."),
    ("I am 30 years old.", "My age is 31."),
    ("I use Vim.", "I switched to Neovim from Vim."),
    ("I use Excel.", "I replaced Excel with Google Sheets."),
    ("我住在杭州", "我现在在深圳生活"),
    ("我住在杭州", "我离开了杭州"),
    ("我在阿里巴巴工作", "我在腾讯当产品经理"),
    ("我在阿里巴巴工作", "我的新公司是腾讯"),
    ("我是一名程序员", "我的职位是产品经理"),
    ("用户在吃低碳水饮食。", "用户现在吃地中海饮食。"),
    ("我最喜欢的电影是盗梦空间", "星际穿越是我最喜欢的电影"),
    ("我打算去日本", "我不去日本了"),
]

# (old, new): true supersessions the rules knowingly miss (counted in the measured recall)
GAPS: list[tuple[str, str]] = [
    ("I live in Hangzhou.", "我搬到上海了"),  # across languages: values can't be compared
    ("用户住在杭州西湖区，骑车上班。", "用户搬到上海了。"),  # the old memory says more
    ("I work at Google.", "I moved to Meta."),  # "moved to" a company reads as ambiguous
    ("I use PyCharm.", "I now use VS Code for coding."),  # "now" is no switch marker
    ("用户用 Notion 做笔记。", "用户现在用 Obsidian 做笔记。"),
    ("The user is planning a trip to Japan.", "The user cancelled the trip they had planned."),
    ("用户计划国庆去日本旅行。", "用户计划去韩国旅行。"),  # plans are many: no marker, no retiring
]

# (old, new): the new memory must NOT retire the old one
NEGATIVES: list[tuple[str, str]] = [
    # other people
    ("I live in Hangzhou.", "My sister lives in Paris."),
    ("我住在杭州", "我妈妈住在北京"),
    ("I work at Google.", "My brother works at Microsoft."),
    ("I'm vegetarian.", "My wife is vegan."),
    ("I'm married.", "My brother got divorced."),
    ("I am 30 years old.", "My son is 5 years old."),
    ("My name is Tom.", "My dog's name is Max."),
    ("My favourite movie is Inception.", "My sister's favourite movie is Titanic."),
    ("I'm a software engineer.", "My wife is a doctor."),
    ("我是一名程序员", "我妹妹是一名医生"),
    ("我打算去日本", "我妹妹不去日本了"),
    ("I'm planning a trip to Japan.", "My sister cancelled her trip to Japan."),
    ("I live in Hangzhou.", "He lives in Beijing. He is my brother."),
    ("I work at Google.", "My sister lives in Paris and works at Microsoft."),
    ("我在阿里巴巴工作", "我妈妈住在北京，在腾讯工作"),
    # multi-valued things
    ("I like hiking.", "I like swimming."),
    ("I use Python.", "I use Rust."),
    ("我喜欢爬山", "我喜欢游泳"),
    ("我用Python", "我也用Rust"),
    ("我用Vim", "我更喜欢用Neovim"),
    ("I drink coffee every morning.", "I drink tea in the evening."),
    ("I use Python.", "I prefer Rust."),
    ("I'm planning a trip to Japan.", "I'm planning a trip to Korea."),
    ("My favourite movie is Inception.", "My favourite book is Dune."),
    ("My favourite movie is Inception.", "One of my favourite movies is Titanic."),
    ("我最喜欢的水果是苹果", "我最喜欢的颜色是蓝色"),
    ("I work at Google.", "I also work at a startup on weekends."),
    ("我在阿里巴巴工作", "我也在腾讯兼职"),
    # the same value restated, or a more specific old value
    ("I live in Hangzhou.", "The user lives in Hangzhou."),
    ("I live in Hangzhou.", "I live in Hangzhou now."),
    ("I live in Hangzhou.", "The user lives in Hangzhou, China."),
    ("I live in Xihu District, Hangzhou.", "I live in Hangzhou."),
    ("我住在杭州西湖区", "我住在杭州"),
    ("I live in Hangzhou and Shanghai.", "I live in Shanghai."),
    ("My favourite food is sushi and ramen.", "My favourite food is ramen."),
    ("I'm planning a trip to Japan.", "I'm planning a trip to Japan with my sister."),
    # other slots, other values, other categories
    ("I live in Hangzhou.", "I visited Shanghai last week."),
    ("I live in Shanghai.", "I used to live in Hangzhou."),
    ("I live in Hangzhou.", "I don't live in Shanghai anymore."),
    ("I work at Google.", "I don't work at Microsoft."),
    ("I work at Google.", "I work in Shanghai."),
    ("我在阿里巴巴工作", "我在杭州工作"),
    ("I work at Google.", "I left Hangzhou."),
    ("I live in Hangzhou.", "I left Google."),
    ("I use PyCharm.", "I switched from Vim to Emacs."),
    ("I use Python and Rust.", "I no longer use Rust."),
    ("I use Python for data analysis.", "I switched from Python to Go for backend services."),
    ("I like Python.", "I switched from Python to Rust."),
    ("I like Vim.", "I no longer use Vim."),
    ("I'm planning a trip to Japan.", "I cancelled my trip to Korea."),
    ("我打算五月去日本", "我取消了去韩国的行程"),
    ("I'm planning a trip to Japan.", "I postponed my trip to Japan."),
    ("I'm going to Japan in May.", "I went to Korea last year."),
    ("I'm vegetarian.", "I'm not a vegan."),
    ("I'm a software engineer.", "I'm a big fan of jazz."),
    # questions, hypotheticals, plans to move, hedges
    ("I live in Hangzhou.", "Should I move to Shanghai?"),
    ("我住在杭州", "我要不要搬去上海？"),
    ("I live in Hangzhou.", "If I moved to Shanghai, I'd be closer to work."),
    ("I live in Hangzhou.", "I'm thinking about moving to Shanghai."),
    ("I live in Hangzhou.", "I'm moving to Shanghai next month."),
    ("我住在杭州", "下个月我搬去上海"),
    ("我住在杭州", "如果搬到上海，通勤会方便很多"),
    ("I'm planning a trip to Japan.", "Maybe I'll cancel my trip to Japan."),
    ("我打算去日本", "我可能不去日本了"),
    ("I'm single.", "Are you single?"),
    ("I use VS Code.", "Do you use VS Code?"),
    # past tense and things that merely look like a frame
    ("I work at Google.", "I worked at Microsoft before."),
    ("I live in Hangzhou.", "I lived in Shanghai for two years."),
    ("我住在杭州", "我以前住在上海"),
    ("I live in Hangzhou.", "I moved to Neovim last year."),
    ("I live in Hangzhou.", "I moved to Google."),
    ("I live in Hangzhou.", "I live in a small apartment."),
    ("I work at Google.", "I work from home now."),
    ("I work at Google.", "I joined a book club."),
    ("我在阿里巴巴工作", "我加入了一个读书会"),
    ("我叫小明", "我叫了外卖"),
    ("I am 30 years old.", "I ran 30 km today."),
    # an old memory that says more than the superseded fact
    ("I live in Hangzhou. I love hiking on weekends.", "I moved to Shanghai."),
    ("用户住在杭州，在阿里巴巴工作", "用户搬到上海了"),
    # the hardening: regions, unnamed values, students, lowercase text, look-alikes
    ("The user is a computer science student.", "The user is an intern at Microsoft."),
    ("I work at Google.", "I work at a startup."),
    ("I live in California.", "I live in San Francisco."),
    ("我住在广东", "我搬到深圳了"),
    ("I live in New York.", "I live in New York City."),
    ("I use PyCharm for Python.", "I switched from PyCharm to VS Code for JavaScript."),
    ("I use an iPhone for work.", "I use a Pixel."),
    ("I'm planning a trip to Japan.", "Tom's Japan trip is off."),
    ("我用微信", "我不用微信付款"),
    ("I'm vegetarian.", "I'm on a keto diet."),
    ("I'm engaged to Anna.", "I'm engaged in a new project."),
    ("I live in Hangzhou.", "i live in fear of spiders"),
    ("I work at Google.", "i left google"),
    ("I'm a teacher.", "I'm a former nurse."),
    ("I work as a designer.", "I work as hard as I can."),
    ("My favourite movie is Inception.", "My favourite part is the ending."),
    ("我住在杭州", "我在医院住了三天"),
    ("我住在杭州", "我住在公司附近"),
    ("我在阿里巴巴工作", "我在找工作"),
    ("I work at Google.", "We work at Microsoft on the integration."),  # "we": not a job
    ("我住在杭州", "我们公司搬到上海了"),  # the company moved
    ("我在阿里巴巴工作", "我在上海浦东工作"),
    ("我叫小明", "我叫他小王"),
    ("我的车是特斯拉", "我的车是红色的"),
    ("I live in Hangzhou.", "I live in Minecraft with my friends lol."),
    ("I use VS Code for coding.", "I now use Copilot for coding."),
    ("我用 VS Code 写代码", "我现在用 Copilot 写代码"),
    ("The user uses an iPhone.", "The user uses a Samsung Galaxy Tab."),
]

OTHER_PEOPLE = [
    "My sister lives in Paris.",
    "My brother works at Microsoft.",
    "我妈妈住在北京。",
    "我同事在腾讯工作。",
    "My friend Tom is vegan.",
    "My wife's favourite movie is Titanic.",
    "我妹妹不去日本了。",
    "My dad switched from Vim to Emacs.",
]


def ids(old: str) -> list[tuple[str, str]]:
    return [("m1", old)]


@pytest.mark.parametrize(("old", "new"), POSITIVES)
def test_a_new_fact_retires_the_outdated_memory(old: str, new: str):
    retired = retired_by(new, ids(old))
    assert [i for i, _ in retired] == ["m1"], f"{new!r} should retire {old!r}"
    reason = retired[0][1]
    assert "->" in reason and ":" in reason, reason


@pytest.mark.parametrize(("old", "new"), NEGATIVES)
def test_a_new_memory_does_not_retire_a_memory_it_does_not_contradict(old: str, new: str):
    assert retired_by(new, ids(old)) == [], f"{new!r} must not retire {old!r}"


@pytest.mark.parametrize(("old", "new"), GAPS)
def test_known_gaps_stay_unretired(old: str, new: str):
    """What the rules knowingly miss: a change here is a change of precision policy."""
    assert retired_by(new, ids(old)) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I moved to Shanghai last month", Frame("residence", "shanghai", previous="")),
        ("The user lives in Shanghai.", Frame("residence", "shanghai")),
        ("Lives in Hangzhou", Frame("residence", "hangzhou")),
        ("I'm based in London", Frame("residence", "london")),
        ("I moved from Hangzhou to Shanghai", Frame("residence", "shanghai", previous="hangzhou")),
        ("I don't live in Hangzhou anymore", Frame("residence", "", True, "hangzhou")),
        ("I used to live in Hangzhou", Frame("residence", "", True, "hangzhou")),
        ("I live in Hangzhou, China", Frame("residence", "hangzhou, china")),
        ("I work at Google", Frame("employer", "google")),
        ("I started a new job at Microsoft", Frame("employer", "microsoft", previous="")),
        ("I left Google", Frame("employer", "", True, "google")),
        ("I work as a nurse", Frame("job_title", "nurse")),
        ("I'm a data scientist now", Frame("job_title", "data scientist")),
        ("I got promoted to senior engineer", Frame("job_title", "senior engineer", previous="")),
        ("My favourite movie is Inception", Frame("favourite:movie", "inception")),
        ("Inception is my favourite film", Frame("favourite:movie", "inception")),
        ("My go-to editor is Vim", Frame("favourite:editor", "vim")),
        ("I prefer tea for breakfast", Frame("favourite:breakfast", "tea")),
        ("I switched from PyCharm to VS Code", Frame("usage:", "vs code", previous="pycharm")),
        ("I now use VS Code instead of PyCharm", Frame("usage:", "vs code", previous="pycharm")),
        ("I no longer use Vim", Frame("usage:", "", True, "vim")),
        ("I stopped drinking coffee", Frame("usage:", "", True, "coffee")),
        ("From now on I use Firefox", Frame("usage:", "firefox", previous="")),
        ("I use Python", Frame("usage:", "python")),
        ("I like hiking", Frame("like:", "hiking")),
        ("I'm planning a trip to Japan in May", Frame("plan:japan", "japan")),
        ("I will go to Japan", Frame("plan:japan", "japan")),
        ("I cancelled my trip to Japan", Frame("plan:japan", "", True, "japan")),
        ("The Japan trip is off", Frame("plan:japan", "", True, "japan")),
        ("I'm going to Korea instead of Japan", Frame("plan:korea", "korea", previous="japan")),
        ("I'm vegan now", Frame("diet", "vegan")),
        ("I got married", Frame("relationship", "married")),
        ("My name is Tom", Frame("name", "tom")),
        ("My name is Nora", Frame("name", "nora")),
        ("I'm 30 years old", Frame("age", "30")),
        ("My phone is an iPhone 15", Frame("phone", "iphone 15")),
        ("My phone number is 138-0000-1234", Frame("phone_number", "13800001234")),
        ("The user uses a Google Pixel phone.", Frame("phone", "pixel")),
        ("The user works at a fintech startup.", Frame("employer", "a fintech startup")),
        ("The user is a computer science student.", Frame("education", "computer science student")),
        ("I'm on a keto diet", Frame("diet_plan", "keto")),
        ("I use VS Code as my main editor", Frame("favourite:editor", "vs code")),
        ("I plan to go to a jazz festival in May", Frame("plan:jazz festival", "jazz festival")),
        ("We cancelled our trip to Japan", Frame("plan:japan", "", True, "japan")),
        ("我搬到上海了", Frame("residence", "上海", previous="")),
        ("用户住在上海。", Frame("residence", "上海")),
        ("我现在在深圳生活", Frame("residence", "深圳")),
        ("我从杭州搬到了上海", Frame("residence", "上海", previous="杭州")),
        ("我搬到上海一年多了", Frame("residence", "上海", previous="")),
        ("我不住在杭州了", Frame("residence", "", True, "杭州")),
        ("我在阿里巴巴工作", Frame("employer", "阿里巴巴")),
        ("我入职了字节跳动", Frame("employer", "字节跳动", previous="")),
        ("我跳槽到了腾讯", Frame("employer", "腾讯", previous="")),
        ("我是一名程序员", Frame("job_title", "程序员")),
        ("我升职为技术总监", Frame("job_title", "技术总监", previous="")),
        ("我最喜欢的电影是盗梦空间", Frame("favourite:电影", "盗梦空间")),
        ("咖啡我更喜欢拿铁", Frame("favourite:咖啡", "拿铁")),
        ("我用 VS Code 写代码", Frame("usage:写代码", "vs code")),
        ("我现在用 VS Code 写代码", Frame("usage:写代码", "vs code")),
        ("我从PyCharm换成了VS Code", Frame("usage:", "vs code", previous="pycharm")),
        ("我改用Firefox了", Frame("usage:", "firefox", previous="")),
        ("以后用Firefox", Frame("usage:", "firefox", previous="")),
        ("我不再用微信了", Frame("usage:", "", True, "微信")),
        ("我打算五月去日本", Frame("plan:日本", "日本")),
        ("我取消了去日本的行程", Frame("plan:日本", "", True, "日本")),
        ("日本不去了", Frame("plan:日本", "", True, "日本")),
        ("我吃素", Frame("diet", "vegetarian")),
        ("我结婚了", Frame("relationship", "married")),
        ("我叫小明", Frame("name", "小明")),
        ("我今年三十岁", Frame("age", "30")),
        ("我的手机是iPhone 15", Frame("phone", "iphone 15")),
        ("用户用的是华为手机。", Frame("phone", "huawei")),
        ("用户在一家创业公司工作。", Frame("employer", "一家创业公司")),
        ("用户是研究生", Frame("education", "研究生")),
        ("用户在吃低碳水饮食。", Frame("diet_plan", "low-carb")),
        ("用户做表格一直用 Excel。", Frame("usage:做表格", "excel")),
        ("新疆那趟取消了", Frame("plan:新疆", "", True, "新疆")),
        ("我把手机换成小米了", Frame("phone", "xiaomi", previous="")),
    ],
)
def test_frame_extraction(text: str, expected: Frame):
    assert frame(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Should I move to Shanghai?",
        "我要不要搬去上海？",
        "If I moved to Shanghai, I'd be happier.",
        "如果我搬到上海就好了",
        "I might move to Shanghai.",
        "I'm thinking about moving to Shanghai.",
        "My sister lives in Paris.",
        "我妈妈住在北京",
        "我的妹妹在腾讯工作",
        "Tom lives in Paris.",
        "I visited Shanghai.",
        "I lived in Shanghai for two years.",
        "I moved to Neovim.",
        "I work from home.",
        "I live in an apartment.",
        "我在杭州工作",
        "我叫了外卖",
        "我加入了一个读书会",
        "",
        "   ",
        "The weather is nice today.",
        "周五之前要把Q3的OKR发给Tom",
        "I live in " + "a very long place name " * 40,  # over MAX_CHARS: left alone
        "我住院了",
        "我在医院住了三天",
        "我在找工作",
        "我叫他小王",
        "I'm engaged in a project.",
        "I'm a former teacher.",
        "My favourite part is the ending.",
    ],
)
def test_no_frame(text: str):
    assert frame(text) is None


def test_several_facts_in_one_memory():
    found = frames("I live in Hangzhou and work at Alibaba.")
    assert found == (Frame("residence", "hangzhou"), Frame("employer", "alibaba"))
    # the old memory is retired only when every fact of it is outdated
    old = [("m1", "I live in Hangzhou and work at Alibaba.")]
    assert retired_by("I moved to Shanghai.", old) == []
    both = retired_by("I moved to Shanghai and joined Tencent as a designer.", old)
    assert [i for i, _ in both] == ["m1"]


def test_reasons_name_the_slot_and_the_values():
    old = [("a", "I live in Hangzhou."), ("b", "I'm planning a trip to Japan.")]
    assert retired_by("I moved to Shanghai.", old) == [("a", "residence: hangzhou -> shanghai")]
    assert retired_by("I cancelled my trip to Japan.", old) == [("b", "plan: japan -> cancelled")]
    assert retired_by("我从PyCharm换成了VS Code", [("c", "我用PyCharm写代码")]) == [
        ("c", "usage:写代码: pycharm -> vs code")
    ]


def test_only_the_matching_memories_are_retired():
    old = [
        ("res", "I live in Hangzhou."),
        ("job", "I work at Google."),
        ("like", "I like hiking."),
        ("sis", "My sister lives in Paris."),
        ("plan", "I'm planning a trip to Japan."),
    ]
    assert [i for i, _ in retired_by("I moved to Shanghai.", old)] == ["res"]
    assert [i for i, _ in retired_by("I started a new job at Apple.", old)] == ["job"]
    assert [i for i, _ in retired_by("日本不去了", old)] == []  # scripts differ: no match
    assert [i for i, _ in retired_by("The Japan trip is off.", old)] == ["plan"]


def test_frame_is_a_frozen_value():
    f = Frame("residence", "shanghai")
    assert (f.cancel, f.previous) == (False, None)
    assert {f, Frame("residence", "shanghai")} == {f}
    with pytest.raises(AttributeError):
        f.value = "hangzhou"  # type: ignore[misc]


def test_a_long_text_is_left_alone():
    long_old = "I live in Hangzhou. " + "I like hiking in the hills near the lake. " * 20
    assert retired_by("I moved to Shanghai.", [("m1", long_old)]) == []
    assert retired_by("I moved to Shanghai. " + "x" * 600, [("m1", "I live in Hangzhou.")]) == []


def test_supersedes_directly():
    hz, sh = Frame("residence", "hangzhou"), Frame("residence", "shanghai")
    assert supersedes(sh, hz) and supersedes(hz, sh)
    assert not supersedes(hz, hz)
    assert not supersedes(Frame("residence", "杭州"), sh)  # not comparable across scripts
    assert not supersedes(Frame("like:", "swimming"), Frame("like:", "hiking"))
    assert not supersedes(Frame("usage:", "rust"), Frame("usage:", "python"))
    assert supersedes(Frame("usage:", "", True, "python"), Frame("usage:", "python"))
    assert not supersedes(Frame("usage:", "", True, "python 2"), Frame("usage:", "python"))
    assert supersedes(Frame("usage:", "", True, "pycharm"), Frame("favourite:ide", "pycharm"))
    assert supersedes(Frame("plan:日本", "", True, "日本"), Frame("plan:日本东京", "日本东京"))
    assert not supersedes(sh, Frame("residence", "", True, "shanghai"))  # old cancels stay


# --- property-based ------------------------------------------------------------------------

ALL_TEXTS = sorted({t for pair in POSITIVES + NEGATIVES + GAPS for t in pair})
# memories as written, several facts joined into one, and arbitrary text
joined = st.lists(st.sampled_from(ALL_TEXTS), min_size=2, max_size=3).map(
    lambda parts: " ".join(p if p.endswith((".", "。", "!", "?")) else f"{p}." for p in parts)
)
texts = st.one_of(st.sampled_from(ALL_TEXTS), joined, st.text(max_size=80))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_frame_never_raises(text: str):
    f = frame(text)
    assert f is None or isinstance(f, Frame)
    assert all(isinstance(x, Frame) for x in frames(text))


@settings(max_examples=200, deadline=None)
@given(texts, st.lists(st.tuples(st.text(min_size=1, max_size=8), texts), max_size=8))
def test_retired_ids_come_from_the_input(new: str, old: list[tuple[str, str]]):
    retired = retired_by(new, old)
    assert {i for i, _ in retired} <= {i for i, _ in old}
    assert all(isinstance(reason, str) and reason for _, reason in retired)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_a_text_never_retires_itself(text: str):
    assert retired_by(text, [("self", text)]) == []
    assert retired_by(f"  {text} ", [("self", text)]) == []  # restated


@settings(max_examples=200, deadline=None)
@given(texts)
def test_no_frame_supersedes_itself_nor_another_of_its_text(text: str):
    found = frames(text)
    assert frame(text) == (found[0] if found else None)
    for f in found:
        assert not supersedes(f, f)
        assert all(not supersedes(f, g) for g in found)  # one text doesn't contradict itself


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ALL_TEXTS), st.permutations([(str(i), t) for i, t in enumerate(ALL_TEXTS)]))
def test_retirement_does_not_depend_on_the_order_of_the_candidates(
    new: str, old: list[tuple[str, str]]
):
    assert sorted(retired_by(new, old)) == sorted(retired_by(new, sorted(old)))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(POSITIVES + NEGATIVES), st.sampled_from(OTHER_PEOPLE))
def test_a_sentence_about_someone_else_creates_no_retirement(pair: tuple[str, str], other: str):
    old, new = pair
    before = set(retired_by(new, ids(old)))
    sep = "" if new.endswith((".", "。", "!", "?", "！", "？")) else "."
    after = set(retired_by(f"{new}{sep} {other}", ids(old)))
    assert after <= before
    assert retired_by(other, ids(old)) == []


# --- measurement ---------------------------------------------------------------------------


def test_precision_and_recall():
    """The counts are pinned: any change of what the rules retire changes one, and must be
    re-pinned deliberately (with the pair that moved)."""
    retired = {
        name: sum(bool(retired_by(new, ids(old))) for old, new in pairs)
        for name, pairs in (("positives", POSITIVES), ("gaps", GAPS), ("negatives", NEGATIVES))
    }
    positives = POSITIVES + GAPS
    tp = retired["positives"] + retired["gaps"]
    fp = retired["negatives"]
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / len(positives)
    print(
        f"\nsupersede: {len(positives)} positive pairs ({len(GAPS)} known gaps), "
        f"{len(NEGATIVES)} hard negatives: precision {precision:.3f}, recall {recall:.3f}; "
        f"retired per table {retired}"
    )
    assert fp == 0 and precision == 1.0
    assert recall >= 0.85
    # tp / fn per table: POSITIVES 97 / 0, GAPS 0 / 7; NEGATIVES fp 0 of 107
    assert (len(POSITIVES), len(GAPS), len(NEGATIVES)) == (97, 7, 107)
    assert retired == {"positives": 97, "gaps": 0, "negatives": 0}


# --- restates: a repeat in other words --------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("We moved to Shanghai last week.", "I live in Shanghai now."),
        ("My favourite editor is Neovim.", "Neovim is my favourite editor."),
        ("我住在上海。", "我们上周搬到上海了。"),
    ],
)
def test_the_same_attribute_and_value_in_other_words_is_a_restatement(old, new):
    assert frames(old) and frames(new)
    assert restates(new, [("a", old)]) == "a"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Hangzhou.", "I moved to Shanghai."),  # another value
        ("I live in Hangzhou.", "My sister lives in Hangzhou."),  # someone else
        ("I live in Hangzhou.", "Where should I eat tonight?"),  # no frame
        ("I live in Hangzhou.", "I live in Hangzhou and I work at Alibaba."),  # says more
    ],
)
def test_a_new_value_another_person_or_more_is_no_restatement(old, new):
    assert restates(new, [("a", old)]) is None


def test_a_text_never_restates_itself():
    assert restates("I live in Hangzhou.", [("a", "I live in Hangzhou.")]) is None


# --- named rules ------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_each_rule_reads_its_positive_examples_and_none_of_its_negatives(rule):
    """Through that rule alone: the frames it reads from each positive, nothing from each
    negative (which other rules may well read)."""
    assert rule.positives and rule.negatives, rule.name
    for example in rule.positives:
        assert read_by(rule, example.text) == example.frames, example.text
    for text in rule.negatives:
        assert read_by(rule, text) == (), text


def test_rule_names_are_unique_and_say_the_language_and_the_slot():
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names)) == 82
    for rule in RULES:
        language, slot, what = rule.name.split(".")
        assert language in ("en", "zh") and slot == rule.slot and what, rule.name


def test_every_rule_fires_on_its_examples_and_the_tables_exercise_every_rule():
    """Among all rules, each positive example is read by its own rule (`explain`), and the
    pairs of POSITIVES, NEGATIVES and GAPS together exercise every rule: a rule no pair
    exercises is named here (add a pair for it; never drop the rule)."""
    silent = [
        (rule.name, example.text)
        for rule in RULES
        for example in rule.positives
        if rule.name not in {reading.rule for reading in explain(example.text)}
    ]
    assert silent == []
    tables = {t for pair in POSITIVES + NEGATIVES + GAPS for t in pair}
    exercised = {reading.rule for text in tables for reading in explain(text)}
    assert [rule.name for rule in RULES if rule.name not in exercised] == []


def test_explain_names_the_rule_behind_each_frame():
    assert explain("I moved to Shanghai last month") == (
        Reading("en.residence.moved_to", Frame("residence", "shanghai", previous="")),
    )
    assert explain("I live in Hangzhou and work at Alibaba.") == (
        Reading("en.residence.lives_in", Frame("residence", "hangzhou")),
        Reading("en.employer.works_at", Frame("employer", "alibaba")),
    )
    assert explain("我从杭州搬到了上海") == (
        Reading("zh.residence.moved_to", Frame("residence", "上海", previous="杭州")),
    )
    assert explain("The weather is nice today.") == ()
